import Foundation
import Shared

/// `POST /api/push/p/{id}`: Web Push delivery (RFC 8030, body per RFC 8291).
///
/// Headers and body are checked first (400, 1001; but a malformed request to a
/// push URL that is unknown or gone is answered 404 or 410, so its sender stops).
/// Then one Redis round trip decides, in this order: unknown id 404 (1003),
/// tombstone 410 (1003), push disabled 403 (1010), the subscription's window 429
/// (1006), the account's monthly quota 429 (1009; active subscriptions only), a body
/// over 8 KB 413 (1004), no usable credential or the workers' circuit flag 502
/// (1007); then a pending subscription's message is stashed and an active one's
/// enqueued, and 201 answers with `Location` and the kept `TTL`. Any storage failure
/// is 503/500 (1005), never a 201.
/// A class, not a struct: its callbacks capture it once per push, and copying a
/// struct of this many references would retain each of them.
final class WebPushRoutes: Sendable {
    static let maximumMessageSize = 8192

    /// Runs the hot-path script: every push's one round trip, pipelined with the others in
    /// flight, and decided in one script run with the pushes that arrive with it.
    let hotPath: RedisMultiplexer
    let keys: RedisKeys
    /// Writes each push as an item of the hot-path script's batched command.
    let scriptEncoder: HotPathScript.Encoder
    let cache: HotPathCache
    let unknownPushes: FailedLookupLimit
    let metrics: IngressMetrics
    let pushRateLimit: RateLimit
    let stashLimit: Int
    let stashLifetimeMilliseconds: Int64
    let maximumTTL: Int
    /// `PUBLIC_BASE_URL` + `/api/push/m/`: the message resources named in `Location`.
    let messageBase: String
    let failureLog: ThrottledLog
    let messageIDs = MessageIDGenerator()
    let quotaMonths = QuotaMonthClock()

    init(
        hotPath: RedisMultiplexer, keys: RedisKeys, scriptEncoder: HotPathScript.Encoder, cache: HotPathCache,
        unknownPushes: FailedLookupLimit, metrics: IngressMetrics, pushRateLimit: RateLimit, stashLimit: Int,
        stashLifetimeMilliseconds: Int64, maximumTTL: Int, messageBase: String, failureLog: ThrottledLog
    ) {
        self.hotPath = hotPath
        self.keys = keys
        self.scriptEncoder = scriptEncoder
        self.cache = cache
        self.unknownPushes = unknownPushes
        self.metrics = metrics
        self.pushRateLimit = pushRateLimit
        self.stashLimit = stashLimit
        self.stashLifetimeMilliseconds = stashLifetimeMilliseconds
        self.maximumTTL = maximumTTL
        self.messageBase = messageBase
        self.failureLog = failureLog
    }

    /// The largest body read for a push: 8 KB, or its base64url text when the body may
    /// be text (`Content-Type: application/json`, or no `Content-Encoding`).
    static func bodyLimit(_ head: HTTPRequestHead) -> Int {
        if head.headers["Content-Encoding"] == nil || WebPushHeaders.isJSON(head.headers) {
            return (maximumMessageSize + 2) / 3 * 4 + 64
        }
        return maximumMessageSize
    }

    /// A push that passed the checks made before Redis, ready for the hot-path script.
    struct Admission: Sendable {
        let headers: WebPushHeaders
        let request: HotPathScript.Request
        /// `request`'s item of the script's batched command.
        let item: RedisMultiplexer.BatchItem
    }

    /// What the checks before Redis decided.
    enum Preparation {
        case admit(Admission)
        /// The decoded message is over the limit: answered like a body over it.
        case oversized(WebPushHeaders)
    }

    func deliver(_ request: HTTPRequest, id: String) async -> HTTPResponse {
        await withCheckedContinuation { continuation in
            deliver(request, id: id) { continuation.resume(returning: $0) }
        }
    }

    /// Delivers, answering through `respond` without a task on the happy path: the script's reply is turned into the response on the Redis
    /// multiplexer's thread. A cache miss (Postgres needed) continues in a task.
    func deliver(_ request: HTTPRequest, id: String, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let admission: Admission
        do {
            switch try prepare(request, id: id) {
            case .oversized(let headers):
                Task { respond(await oversized(request.head, id: id, headers: headers)) }
                return
            case .admit(let admitted): admission = admitted
            }
        } catch {
            Task { respond(await rejectMalformed(error, request.head, id: id)) }
            return
        }
        let head = request.head  // for a cache miss's lookup (the client's allowance); not the body
        hotPath.send(admission.item) { [self] result in
            do {
                let decision = try refusal(HotPathScript.decision(from: result.get()), of: admission.request)
                if case .cacheMiss = decision {
                    Task {
                        do {
                            let decision = try await decide(admission.request, of: head, after: decision)
                            respond(try answer(decision, admission))
                        } catch {
                            respond(reject(error))
                        }
                    }
                    return
                }
                respond(try answer(decision, admission))
            } catch {
                respond(reject(error))
            }
        }
    }

    /// The checks that need no I/O (headers, body, id), then the script's command.
    private func prepare(_ request: HTTPRequest, id: String) throws -> Preparation {
        let headers = try WebPushHeaders(request.headers, maximumTTL: maximumTTL, bodyIsEmpty: request.body.isEmpty)
        var message = request.body
        switch headers.bodyFormat {
        case .aes128gcm: break
        case .aes128gcmOrText:
            if !AES128GCMMessage.isBinary(message) { message = try AES128GCMMessage.decodeText(message) }
        }
        if message.count > Self.maximumMessageSize { return .oversized(headers) }
        try AES128GCMMessage.validate(message)
        guard SubscriptionID.isWellFormed(id) else { throw PushAPIError.notFound }
        let messageID = messageIDs.next()
        let request = scriptRequest(
            id: id, scope: .push, messageID: messageID, ciphertext: message, headers: headers, now: Date())
        return .admit(Admission(headers: headers, request: request, item: scriptEncoder.item(request)))
    }

    /// 201 for a queued, stashed or discarded (TTL 0 while pending) push, with the
    /// `TTL` kept: a stashed message is kept no longer than the stash's lifetime, and
    /// RFC 8030 §5.2 wants a shorter retention than asked for said.
    private func answer(_ decision: HotPathScript.Decision, _ admission: Admission) throws -> HTTPResponse {
        var ttl = admission.headers.ttl
        switch decision {
        case .queued: metrics.pushAccepted()
        case .stashed:
            metrics.pushStashed()
            ttl = min(ttl, Int(stashLifetimeMilliseconds / 1000))
        case .discarded:
            metrics.pushDiscarded()
            ttl = 0
        default: throw PushAPIError.storageFailed
        }
        let headers = HTTPHeaders([("Location", messageBase + admission.request.messageID), ("TTL", String(ttl))])
        return HTTPResponse(status: 201, headers: headers)
    }

    /// A body over the limit (never buffered): the checks that come before 413 in
    /// the answer order still run, so an unknown id is 404, not 413.
    func oversized(_ head: HTTPRequestHead, id: String) async -> HTTPResponse {
        do {
            let headers = try WebPushHeaders(head.headers, maximumTTL: maximumTTL)
            return await oversized(head, id: id, headers: headers)
        } catch {
            return await rejectMalformed(error, head, id: id)
        }
    }

    /// A request the checks before Redis refused (`error`): 404 or 410 if its push
    /// URL is unknown or gone, else `error`'s answer. The URL's fate matters more to
    /// the sender than its request's flaws; if Redis cannot tell, `error` stands.
    private func rejectMalformed(_ error: any Error, _ head: HTTPRequestHead, id: String) async -> HTTPResponse {
        guard (error as? PushAPIError)?.code == .invalidParameters else { return reject(error) }
        guard SubscriptionID.isWellFormed(id) else { return reject(PushAPIError.notFound) }
        let request = scriptRequest(
            id: id, scope: .existence, messageID: messageIDs.next(), ciphertext: [], headers: nil, now: Date())
        do {
            _ = try await decide(request, of: head)
        } catch let refusal as PushAPIError where refusal.code == .subscriptionNotFound {
            return reject(refusal)
        } catch {
            // Redis could not tell; the request's own flaw is still the answer.
        }
        return reject(error)
    }

    private func oversized(_ head: HTTPRequestHead, id: String, headers: WebPushHeaders) async -> HTTPResponse {
        do {
            guard SubscriptionID.isWellFormed(id) else { throw PushAPIError.notFound }
            let messageID = messageIDs.next()
            let request = scriptRequest(
                id: id, scope: .checkBeforeSize, messageID: messageID, ciphertext: [], headers: headers, now: Date())
            _ = try await decide(request, of: head)
            throw PushAPIError.tooLarge
        } catch {
            return reject(error)
        }
    }

    /// What the hot-path script decides for one push (or, with a narrower `scope`,
    /// for the checks of a request that cannot be accepted; `headers` are nil when
    /// they were malformed, and then unused).
    private func scriptRequest(
        id: String, scope: HotPathScript.Scope, messageID: String, ciphertext: [UInt8], headers: WebPushHeaders?,
        now: Date
    ) -> HotPathScript.Request {
        let acceptedAt = Int64(now.timeIntervalSince1970 * 1000)
        return HotPathScript.Request(
            subscriptionID: id, scope: scope, rateLimit: pushRateLimit.limit,
            rateWindowMilliseconds: pushRateLimit.windowMilliseconds, stashLimit: stashLimit,
            stashLifetimeMilliseconds: stashLifetimeMilliseconds, quotaMonth: quotaMonths.month(of: now),
            messageID: messageID, ciphertext: ciphertext, priority: headers?.priority ?? 10,
            expiration: headers.map { $0.ttl == 0 ? 0 : acceptedAt / 1000 + Int64($0.ttl) } ?? 0,
            collapseID: headers?.topic, acceptedAt: acceptedAt)
    }

    /// Runs the hot-path script, filling the cache from Postgres on a miss (within
    /// `HotPathCache.maximumScriptRuns`; stale entries are kept in use when Postgres
    /// cannot be read), and turns refusals into `PushAPIError`s. `earlier` is the
    /// decision of a run already made (by the callback path), which counts as the first.
    /// A subscription Redis does not know is looked up within `head`'s client's
    /// allowance of unknown pushes (`FailedLookupLimit`).
    private func decide(
        _ request: HotPathScript.Request, of head: HTTPRequestHead, after earlier: HotPathScript.Decision? = nil
    ) async throws -> HotPathScript.Decision {
        var request = request
        var decision = earlier
        for attempt in 0..<HotPathCache.maximumScriptRuns {
            if attempt > 0 || decision == nil {
                let reply = try await hotPath.send(scriptEncoder.item(request))
                decision = try refusal(HotPathScript.decision(from: reply), of: request)
            }
            guard case .cacheMiss(let kind, let entryID, let stale) = decision else { return decision! }
            // A subscription Redis does not know counts against its client unless found
            // (or the lookup failed: Postgres's fault, not the client's).
            let lookup = kind == "subscription" && !stale ? try await unknownPushes.admit(head) : nil
            let found: Bool
            do {
                found = try await cache.refresh(kind: kind, id: entryID, stale: stale, for: &request)
            } catch {
                if let lookup { await unknownPushes.release(lookup) }
                throw error
            }
            if let lookup, found { await unknownPushes.release(lookup) }
        }
        // The cache keeps missing (evicted as fast as it is filled): a storage problem.
        throw PushAPIError.storageUnavailable
    }

    /// The decision itself when it lets the push through (or asks for a cache fill);
    /// a refusal thrown as its `PushAPIError`.
    private func refusal(
        _ decision: HotPathScript.Decision, of request: HotPathScript.Request
    ) throws(PushAPIError) -> HotPathScript.Decision {
        switch decision {
        case .queued, .stashed, .discarded, .checked, .cacheMiss: return decision
        case .notFound: throw .notFound
        case .gone: throw .gone
        case .disabled: throw .pushDisabled
        case .rateLimited(let milliseconds): throw .tooManyRequests(retryAfter: Int((milliseconds + 999) / 1000))
        case .quotaExceeded:
            // From the acceptance time whose month was refused (at a month's end, the next is a second away).
            let acceptedAt = Date(timeIntervalSince1970: TimeInterval(request.acceptedAt) / 1000)
            throw .quotaExceeded(secondsToNextMonth: quotaMonths.secondsToNextMonth(from: acceptedAt))
        case .undeliverable(let reason, let circuitMilliseconds):
            metrics.refusedUndeliverable(reason)
            // The circuit comes down by itself (or on a worker's success): say when at the
            // latest. A credential needs its owner, so there is no time to give.
            guard let circuitMilliseconds else { throw .deliveryFailed }
            throw .circuitOpen(forMilliseconds: circuitMilliseconds)
        case .inactive: throw .notFound  // `app` mode only; Web Push never runs it
        }
    }

    private func reject(_ error: any Error) -> HTTPResponse {
        let apiError = StorageFailure.apiError(for: error)
        if StorageFailure.isStorageError(error) {
            failureLog.warning("push not accepted: storage failed", error: error)
        }
        metrics.pushRejected(apiError)
        return apiError.response
    }
}
