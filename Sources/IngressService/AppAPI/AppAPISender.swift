import Foundation
import Shared

/// `POST /send`: decides what it can at the ingress (not_found, gone, invalid,
/// inactive, skipped, quota_exceeded), enqueues the rest through the hot-path script in `app`
/// mode (the same stream entry as Web Push, plus `reply`), then waits on the
/// request's reply list for the workers' outcomes until the deadline (`queued` after).
struct AppAPISender: Sendable {
    let repository: AppAPIRepository
    let redis: RedisClient
    let keys: RedisKeys
    let cache: HotPathCache
    let replies: ReplyCollector
    let maximumTTLSeconds: Int
    let deadline: Duration
    let metrics: IngressMetrics

    /// How long a call waits for its Postgres reads (the key, the batch's
    /// subscriptions) before it answers 503: a Postgres that does not answer at all (a
    /// frozen server, a network dropping everything) must not hold the caller for as
    /// long. Nothing is queued before them, so a caller that tries again sends once.
    static let readWait: Duration = .seconds(5)

    func send(_ batch: SendBatch, app: String) async throws -> HTTPResponse {
        let start = ContinuousClock.now
        let ids = Array(Set(batch.messages.map(\.subscriptionID).filter(SubscriptionID.isWellFormed)))
        let (appPushes, targets) = try await withTimeLimit(Self.readWait) { [repository] in
            try await repository.sendTargets(ids, app: app)
        }
        // Refused as a whole, whatever its messages (a batch of unknown ids too); the
        // script refuses a switch-off that lands while the batch is queued.
        guard appPushes else { throw AppAPIError.pushDisabled }
        let gone = try await tombstoned(ids.filter { targets[$0] == nil }, app: app)
        let month = RedisKeys.quotaMonth()
        var outcomes: [SendOutcome] = []
        var queued: [Queueable] = []
        for message in batch.messages {
            let id = message.subscriptionID
            guard let target = targets[id], target.appID == app else {
                outcomes.append(SendOutcome(id, gone.contains(id) ? "gone" : "not_found"))
                continue
            }
            guard let ciphertext = message.ciphertext else {
                outcomes.append(SendOutcome(id, "invalid"))
                continue
            }
            guard target.active else {
                outcomes.append(SendOutcome(id, "inactive"))
                continue
            }
            guard !target.skipped else {
                outcomes.append(SendOutcome(id, "skipped"))
                continue
            }
            queued.append(Queueable(index: outcomes.count, message: message, ciphertext: ciphertext))
            outcomes.append(SendOutcome(id, "queued"))
        }
        let answers = try await queueAndCollect(queued, into: &outcomes, month: month, until: start + deadline)
        // Quota is reserved as a message is queued and given back when it fails: the
        // batch's own failures (dead tokens, say) may have made room for those refused
        // for quota. As many of them as were given back are tried once more, in order.
        let givenBack = answers.values.filter { $0.status != "sent" }.count
        let refused = queued.filter { outcomes[$0.index].status == "quota_exceeded" }
        if givenBack > 0, !refused.isEmpty, ContinuousClock.now < start + deadline {
            _ = try await queueAndCollect(
                Array(refused.prefix(givenBack)), into: &outcomes, month: month, until: start + deadline,
                othersQueued: true)
        }
        for outcome in outcomes { metrics.appAPIMessages.increment(by: 1, outcome.status, outcome.reason) }
        return .json(200, "{\"results\":[" + outcomes.map(\.json).joined(separator: ",") + "]}")
    }

    /// A message that passed the ingress's checks, with its place in the answer.
    private struct Queueable {
        let index: Int
        let message: SendBatch.Message
        let ciphertext: [UInt8]
    }

    /// Queues `messages` one by one (their outcomes in `outcomes` at their indices:
    /// what the ingress decided, or `queued`), then waits on one reply list for the
    /// workers' outcomes until `deadline`; returns those answered. `othersQueued`:
    /// messages of the batch were queued before these.
    private func queueAndCollect(
        _ messages: [Queueable], into outcomes: inout [SendOutcome],
        month: String, until deadline: ContinuousClock.Instant, othersQueued: Bool = false
    ) async throws -> [String: ReplyCollector.Reply] {
        let replyKey = keys.reply(Base64URL.encode(SecureRandom.bytes(16)))
        var waiting: [String: Int] = [:]  // message id → index in outcomes
        for queueable in messages {
            let (index, message, ciphertext) = (queueable.index, queueable.message, queueable.ciphertext)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let messageID = Base64URL.encode(SecureRandom.bytes(16))
            let request = HotPathScript.Request.appAPI(
                subscriptionID: message.subscriptionID, quotaMonth: month, messageID: messageID,
                ciphertext: ciphertext, priority: message.priority,
                expiration: now / 1000 + Int64(maximumTTLSeconds), acceptedAt: now, replyKey: replyKey)
            let anyQueued = othersQueued || !waiting.isEmpty
            let outcome: (status: String, reason: String)
            var mayBeQueued = false
            do {
                outcome = try await enqueue(request)
            } catch let refusal as AppAPIError where refusal == .pushDisabled && anyQueued {
                // Turned off while this request was being queued: those before it went.
                outcome = ("failed", "push_disabled")
            } catch let error as RedisError where error.mayHaveRun {
                // The script was sent and its answer lost: it may have queued the message.
                // If it did, the worker answers on the reply list like the others do;
                // without an answer by the deadline it stays failed.
                outcome = ("failed", "storage_error")
                mayBeQueued = true
            } catch where anyQueued {
                // Earlier messages are (or may be) queued: a 5xx now would hide them (and
                // a retry would send them twice), so this one alone reports the failure.
                outcome = ("failed", "storage_error")
            }
            if outcome.status == "queued" || mayBeQueued { waiting[messageID] = index }
            outcomes[index].status = outcome.status
            outcomes[index].reason = outcome.reason
        }
        guard !waiting.isEmpty else { return [:] }
        // If the reply list cannot be read, the queued messages stay `queued`:
        // accepted, outcome unknown — never an error that hides them.
        let answered = await replies.collect(from: replyKey, expecting: Set(waiting.keys), deadline: deadline)
        for (messageID, reply) in answered {
            guard let index = waiting[messageID] else { continue }
            outcomes[index].status = reply.status
            outcomes[index].reason = reply.reason
        }
        return answered
    }

    /// Of `ids` (subscriptions not in Postgres), those the workers deleted because
    /// their device token died, while the tombstone lasts: `gone` again, as on the
    /// first send. Only to the subscription's own app (the tombstone holds it), so
    /// another app learns nothing about ids that are not its own.
    private func tombstoned(_ ids: [String], app: String) async throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        let reply = try await redis.send(RedisCommand("MGET", arguments: ids.map(keys.tombstone)))
        let apps = try reply.throwingError().array ?? []
        return Set(zip(ids, apps).filter { $0.1.string == app }.map(\.0))
    }

    /// Runs the script (filling the cache on a miss); the status before the workers answer.
    private func enqueue(_ request: HotPathScript.Request) async throws -> (status: String, reason: String) {
        var request = request
        for _ in 0..<HotPathCache.maximumScriptRuns {
            let reply = try HotPathScript.itemReply(await redis.send(HotPathScript.command(request, keys: keys)))
            switch try HotPathScript.decision(from: reply) {
            case .queued: return ("queued", "")
            case .notFound: return ("not_found", "")
            case .gone: return ("gone", "")
            case .inactive, .stashed, .discarded: return ("inactive", "")
            case .quotaExceeded: return ("quota_exceeded", "")
            case .disabled: throw AppAPIError.pushDisabled
            case .undeliverable(let reason, _):
                metrics.refusedUndeliverable(reason)
                return ("failed", reason)
            case .cacheMiss(let kind, let id, let stale):
                try await cache.refresh(kind: kind, id: id, stale: stale, for: &request)
            case .rateLimited, .checked:
                return ("failed", "provider_error")
            }
        }
        return ("failed", "provider_error")
    }
}
