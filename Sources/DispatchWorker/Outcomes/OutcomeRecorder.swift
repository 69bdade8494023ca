import Foundation
import Shared

/// Writes a message's outcome back and settles it in its entry (`PendingEntry`);
/// the entry is acknowledged, with the Redis side of its messages' outcomes, once
/// all of them settled:
///
/// | outcome | Postgres (batched: the daily counts moved from Redis by `CountTransfer`) | Redis (one `QueueScripts.acknowledge` run with the acknowledgement, unless noted; it adds the daily count) |
/// |---|---|---|
/// | sent | daily `sent` +1, `last_push_at` | reply `sent`; the quota stays reserved |
/// | gone | subscription deleted (unless updated after Apple's verdict), daily `gone` +1 | tombstone + cache/stash dropped (before), quota released, reply `gone` |
/// | credential rejected | credential flagged (before), daily `failed` +1 | app caches dropped (before), quota released, reply `failed` |
/// | failed, expired | daily `failed` +1 | quota released, reply `failed` |
/// | subscription deleted, push disabled (found so before a retry, or a send that waited) | — | quota released, reply `not_found`, or `failed`/`push_disabled` |
/// | replaced (a newer message of its Web Push topic was queued) | — | quota released |
/// | retry, postponed, or unsent at shutdown | — | put on the delayed-retry set; quota stays reserved |
/// | dead letter (a whole entry) | daily `failed` +1 per message | moved to `<stream>:dead` with its reason, quotas released, replies `failed`, counted (its own script) |
///
/// When a Postgres or Redis write of an outcome fails, or has not answered within
/// `writeWait` (a frozen Postgres, a lock: the message would hold its in-flight permit
/// as long, and enough of them would stall the worker), the message is retried (alone)
/// instead; the write goes on, and whichever of it and the retry comes second finds
/// the work done. When the acknowledgement itself cannot be written, the entry stays
/// pending and another worker claims it after the visibility timeout.
final class OutcomeRecorder: Sendable {
    let redis: RedisClient
    let acknowledger: Acknowledger
    let limiter: InFlightLimiter
    let circuit: CircuitBreaker
    let credentials: CredentialCache
    let remover: SubscriptionRemover
    let rejecter: CredentialRejecter
    let retryPolicy: RetryPolicy
    let metrics: WorkerMetrics
    let operatorLog: OperatorLog
    let logger: Logger
    let tombstoneLifetimeSeconds: Int
    let replyLifetimeSeconds: Int
    /// How long the dead-letter stream keeps an entry (`DEAD_LETTER_TTL_SECONDS`).
    let deadLetterLifetimeSeconds: Int
    /// How long an outcome waits for its Postgres write before the message is retried.
    static let writeWait: Duration = .seconds(3)
    /// One line now and then while writes keep failing (Postgres away), not one per message.
    private let retryLog: ThrottledLog
    init(
        redis: RedisClient, acknowledger: Acknowledger, limiter: InFlightLimiter, circuit: CircuitBreaker,
        credentials: CredentialCache, remover: SubscriptionRemover,
        rejecter: CredentialRejecter, retryPolicy: RetryPolicy, metrics: WorkerMetrics, operatorLog: OperatorLog,
        logger: Logger, tombstoneLifetimeSeconds: Int, replyLifetimeSeconds: Int, deadLetterLifetimeSeconds: Int
    ) {
        self.redis = redis
        self.acknowledger = acknowledger
        self.limiter = limiter
        self.circuit = circuit
        self.credentials = credentials
        self.remover = remover
        self.rejecter = rejecter
        self.retryPolicy = retryPolicy
        self.metrics = metrics
        self.operatorLog = operatorLog
        self.logger = logger
        retryLog = ThrottledLog(logger: logger, interval: .seconds(10))
        self.tombstoneLifetimeSeconds = tombstoneLifetimeSeconds
        self.replyLifetimeSeconds = replyLifetimeSeconds
        self.deadLetterLifetimeSeconds = deadLetterLifetimeSeconds
    }

    /// How long a TTL-0 ("now or never") message may wait in the queue and in retries.
    static let nowOrNeverMilliseconds: Int64 = 30_000

    /// The last moment (UNIX ms) a message may still be sent.
    static func deadline(of message: QueueMessage) -> Int64 {
        message.ttlEnd ?? message.acceptedAt &+ nowOrNeverMilliseconds
    }

    /// Records `outcome` without waiting when it is `sent` and no circuit is raised
    /// (the common case: the entry only joins the acknowledger's next write).
    /// Returns false, having done nothing, when the outcome needs `record`.
    func recordAtOnce(_ outcome: DeliveryOutcome, _ delivery: Delivery) -> Bool {
        guard case .sent = outcome, !circuit.isTracking else { return false }
        // Checked here: the message's fields are strings made on each read.
        if circuit.isClearingInherited {
            circuit.clearInherited(
                credential: delivery.message.credentialID, environment: delivery.message.environment,
                keys: delivery.context.keys)
        }
        finish(delivery, status: "sent", reason: "", tally: .sent, releaseQuota: false)
        return true
    }

    func record(_ outcome: DeliveryOutcome, _ delivery: Delivery) async {
        if case .sent = outcome {
            // The common case, kept to field reads of the shared delivery.
            await circuit.success(
                credential: delivery.message.credentialID, environment: delivery.message.environment,
                keys: delivery.context.keys)
            finish(delivery, status: "sent", reason: "", tally: .sent, releaseQuota: false)
            return
        }
        let (message, context) = (delivery.message, delivery.context)
        switch outcome {
        case .sent:
            break

        case .gone(let timestamp, let reason):
            if message.knownOutcome == nil {  // an answer from APNs now, not one carried from before
                await circuit.success(
                    credential: message.credentialID, environment: message.environment, keys: context.keys)
            }
            let invalidation = CacheInvalidation(
                redis: redis, keys: context.keys, tombstoneLifetimeSeconds: tombstoneLifetimeSeconds)
            do {
                let removal = try await withTimeLimit(Self.writeWait) { [remover] in
                    try await remover.remove(message, unregisteredAt: timestamp, invalidation: invalidation)
                }
                switch removal {
                case .removed:
                    metrics.sends.increment(by: 1, "gone", reason)
                    finish(delivery, status: "gone", reason: "", tally: .gone, releaseQuota: true)
                case .kept:
                    metrics.sends.increment(by: 1, "failed", reason + "_kept")
                    finish(delivery, status: "failed", reason: "provider_error", tally: .failed, releaseQuota: true)
                }
            } catch {
                await retryLater(delivery, outcome, "cannot delete a gone subscription", error)
            }

        case .credentialRejected(let reason):
            // Remembered before it is written: while it cannot be, the messages after this
            // one fail fast instead of each asking APNs again.
            credentials.markRejected(message.credentialID)
            let invalidation = CacheInvalidation(
                redis: redis, keys: context.keys, tombstoneLifetimeSeconds: tombstoneLifetimeSeconds)
            do {
                let apps = try await withTimeLimit(Self.writeWait) { [rejecter] in
                    try await rejecter.reject(
                        credentialID: message.credentialID, reason: "APNs answered \(reason)",
                        invalidation: invalidation)
                }
                if !apps.isEmpty {
                    logger.warning(
                        "APNs rejected a credential; it is flagged and its apps' pushes fail until it is verified again or replaced",
                        metadata: ["credential": message.credentialID, "apns.reason": reason, "apps": "\(apps.count)"])
                }
            } catch {
                await retryLater(delivery, outcome, "cannot flag a rejected credential", error)
                return
            }
            metrics.sends.increment(by: 1, "failed", "credential_rejected")
            finish(delivery, status: "failed", reason: "credential_rejected", tally: .failed, releaseQuota: true)

        case .failed(let reason, let detail):
            if detail == "DeviceTokenNotForTopic" || detail == "TopicDisallowed" || detail == "BadEnvironmentKeyInToken"
                || reason == .credentialMissing
            {
                operatorLog.warning(
                    detail == "credential_unopenable"
                        ? "a notification failed: its push credential does not open"
                        : detail == "ProviderToken"
                            ? "a notification failed: its push credential's key cannot sign a provider token"
                            : reason == .credentialMissing
                                ? "a notification failed: its app has no push credential"
                                : "APNs refused a notification for a configuration reason",
                    key: "\(detail):\(message.appID):\(message.topic)",
                    metadata: [
                        "apns.reason": detail, "app": message.appID, "topic": message.topic,
                        "credential": message.credentialID,
                    ])
            }
            metrics.sends.increment(by: 1, reason == .expired ? "expired" : "failed", detail)
            finish(delivery, status: "failed", reason: reason.replyReason, tally: .failed, releaseQuota: true)

        case .retry(let cause, let countsAgainstCircuit):
            if countsAgainstCircuit {
                circuit.failure(credential: message.credentialID, environment: message.environment, keys: context.keys)
            }
            await retryOrGiveUp(delivery, cause: cause, deadline: Self.deadline(of: message))

        case .postponed(let cause, let atLeast):
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            switch retryPolicy.postpone(
                ageMilliseconds: now - message.acceptedAt, atLeastMilliseconds: atLeast, nowMilliseconds: now,
                deadlineMilliseconds: Self.deadline(of: message))
            {
            case .retry(let delay):
                putBack(delivery, afterMilliseconds: delay, attempts: message.attempts, cause: cause)
            case .giveUp:
                await record(.failed(.expired, detail: "expired"), delivery)
            }

        case .abandoned:
            // Unsent at shutdown: back on the stream through the retry set at once (not
            // an attempt), so the entry's other messages, sent, are not sent again.
            putBack(delivery, afterMilliseconds: 0, attempts: message.attempts, cause: "shutdown")

        case .subscriptionDeleted:
            discard(delivery, reason: "subscription_deleted", status: "not_found", replyReason: "")

        case .pushDisabled:
            discard(delivery, reason: "push_disabled", status: "failed", replyReason: "push_disabled")

        case .replaced:
            // Web Push only: App API messages carry no topic, so no reply list waits.
            discard(delivery, reason: "topic_replaced", status: "failed", replyReason: "provider_error")
        }
    }

    /// A message not sent after waiting (`RetriedSubscriptionCheck`, `TopicSupersession`): APNs never took it
    /// (its attempts failed, if it had any), so it is no send of the day and in no count.
    private func discard(_ delivery: Delivery, reason: String, status: String, replyReason: String) {
        metrics.sends.increment(by: 1, "discarded", reason)
        finish(delivery, status: status, reason: replyReason, tally: nil, releaseQuota: true)
    }

    /// Moves an entry that cannot be handled (unreadable, or handed out too often) to
    /// the dead-letter stream with its reason, all of its `messages` (none when it
    /// cannot be read) failed; it held `permits` in-flight permits.
    func deadLetter(
        _ entry: StreamEntry, messages: [QueueMessage], permits: Int, reason: String, metricReason: String,
        context: StreamContext
    ) async {
        var arguments: [any RedisValueConvertible] = [
            context.group, entry.id, reason, replyLifetimeSeconds, deadLetterLifetimeSeconds, messages.count,
        ]
        let day = UTCDay.text(of: Date())
        for message in messages {
            arguments.append(message.quotaKey)
            arguments.append(message.replyKey ?? "")
            arguments.append(
                message.hasReplyKey
                    ? ReplyJSON.make(messageID: message.messageID, status: "failed", reason: "provider_error") : "")
            arguments.append(
                CounterField.make(account: message.accountID, app: message.appID, day: day, kind: .failed))
        }
        do {
            let moved = try await redis.run(
                QueueScripts.deadLetter,
                keys: [context.stream, context.keys.deadLetters, context.keys.pendingCounts],
                arguments: arguments + entry.fields.list)
            if moved.int == 1 {
                metrics.deadLetters.increment(by: Double(max(1, messages.count)), metricReason)
                logger.warning(
                    "entry moved to the dead-letter stream",
                    metadata: [
                        "stream": context.stream, "entry": entry.id, "messages": "\(messages.count)", "reason": reason,
                    ])
            }
        } catch {
            logger.warning("cannot dead-letter an entry", metadata: ["entry": entry.id, "error": "\(type(of: error))"])
        }
        // Let go either way: one still pending is an orphan the consumer takes again.
        context.held.remove(CollectionOfOne(entry.id))
        limiter.release(permits)
    }

    /// Settles the message in its entry; it is counted (`tally`) once acknowledged.
    private func finish(
        _ delivery: Delivery, status: String, reason: String, tally: DailyCounts.Kind?, releaseQuota: Bool
    ) {
        settle(
            delivery,
            Acknowledgement.Item(
                delivery: delivery, tally: tally, releaseQuota: releaseQuota,
                replyJSON: !delivery.message.hasReplyKey
                    ? nil : ReplyJSON.make(messageID: delivery.message.messageID, status: status, reason: reason),
                retry: nil))
    }

    /// Settles the message in its entry; the last one's settling hands the entry's
    /// acknowledgement to the acknowledger.
    /// The message goes back through the delayed-retry set, its quota still reserved,
    /// with `attempts` APNs attempts used so far.
    private func putBack(
        _ delivery: Delivery, afterMilliseconds delay: Int, attempts: Int, cause: String, knownOutcome: String? = nil
    ) {
        settle(
            delivery,
            Acknowledgement.Item(
                delivery: delivery, tally: nil, releaseQuota: false, replyJSON: nil,
                retry: Acknowledgement.Retry(
                    delayMilliseconds: delay, attempts: attempts, cause: cause, knownOutcome: knownOutcome)))
    }

    private func settle(_ delivery: Delivery, _ item: Acknowledgement.Item) {
        guard let items = delivery.entry.settle(item) else { return }
        acknowledger.enqueue(Acknowledgement(entry: delivery.entry, items: items))
    }

    /// An outcome that could not be written (Postgres or Redis failed) is not final:
    /// the message is put back alone, like any retry (so its entry's other messages
    /// are acknowledged and not sent twice), carrying APNs's answer (`KnownOutcome`)
    /// so that its next turn writes it rather than asking APNs again. Its attempts
    /// bound the writes, and its TTL does not: a gone device's subscription is
    /// deleted however old the message.
    private func retryLater(_ delivery: Delivery, _ outcome: DeliveryOutcome, _ what: String, _ error: any Error)
        async
    {
        retryLog.warning(
            "\(what); the message is retried",
            metadata: ["entry": delivery.entry.id, "error": ThrottledLog.describe(error)])
        await retryOrGiveUp(
            delivery, cause: "outcome_not_written", deadline: .max, knownOutcome: KnownOutcome.text(of: outcome))
    }

    /// Puts the message back with one more attempt used, or, once its attempts (or
    /// `deadline`, UNIX ms) are spent, fails it with `provider_error`.
    private func retryOrGiveUp(
        _ delivery: Delivery, cause: String, deadline: Int64, knownOutcome: String? = nil
    ) async {
        let attempts = delivery.message.attempts + 1
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        switch retryPolicy.decide(attempts: attempts, nowMilliseconds: now, deadlineMilliseconds: deadline) {
        case .retry(let delay):
            putBack(delivery, afterMilliseconds: delay, attempts: attempts, cause: cause, knownOutcome: knownOutcome)
        case .giveUp:
            await record(.failed(.providerError, detail: cause), delivery)
        }
    }
}
