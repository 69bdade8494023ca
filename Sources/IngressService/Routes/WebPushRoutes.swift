import Foundation
import Shared

/// `POST /api/push/p/{id}`: Web Push delivery (RFC 8030, body per RFC 8291).
///
/// Headers and body are checked first (400, 1001). Then one Redis round trip
/// decides, in this order: unknown id 404 (1003), tombstone 410 (1003), push
/// disabled 403 (1010), the subscription's window 429 (1006), the account's
/// monthly quota 429 (1009; active subscriptions only), a body over 8 KB 413
/// (1004), no usable credential or the workers' circuit flag 502 (1007); then a
/// pending subscription's message is stashed and an active one's enqueued, and
/// 201 answers with `Location` and the kept `TTL`. Any storage failure is 503/500
/// (1005), never a 201.
struct WebPushRoutes: Sendable {
    static let maximumMessageSize = 8192

    /// Runs the hot-path script: every push's one round trip, pipelined with the others in flight.
    let hotPath: RedisMultiplexer
    let keys: RedisKeys
    let cache: HotPathCache
    let metrics: IngressMetrics
    let pushRateLimit: RateLimit
    let stashLimit: Int
    let stashLifetimeMilliseconds: Int64
    let maximumTTL: Int
    /// `PUBLIC_BASE_URL` + `/api/push/m/`: the message resources named in `Location`.
    let messageBase: String
    let failureLog: ThrottledLog

    /// The largest body read for a push: 8 KB, or its base64url text in the older form.
    static func bodyLimit(_ head: HTTPRequestHead) -> Int {
        if head.headers["Content-Encoding"] == nil { return (maximumMessageSize + 2) / 3 * 4 + 64 }
        return maximumMessageSize
    }

    func deliver(_ request: HTTPRequest, id: String) async -> HTTPResponse {
        do {
            let headers = try WebPushHeaders(request.headers, maximumTTL: maximumTTL)
            var message = request.body
            if headers.bodyFormat == .base64URLText { message = try AES128GCMMessage.decodeText(message) }
            if message.count > Self.maximumMessageSize {
                return await oversized(id: id, headers: headers)
            }
            try AES128GCMMessage.validate(message)
            guard SubscriptionID.isWellFormed(id) else { throw PushAPIError.notFound }
            let messageID = Base64URL.encode(SecureRandom.bytes(16))
            let now = Date()
            let decision = try await decide(
                id: id, checkOnly: false, messageID: messageID, ciphertext: message, headers: headers, now: now)
            switch decision {
            case .queued: metrics.pushAccepted()
            case .stashed: metrics.pushStashed()
            default: throw PushAPIError.storageFailed
            }
            var responseHeaders = HTTPHeaders()
            responseHeaders.add("Location", messageBase + messageID)
            responseHeaders.add("TTL", String(headers.ttl))
            return HTTPResponse(status: 201, headers: responseHeaders)
        } catch {
            return reject(error)
        }
    }

    /// A body over the limit (never buffered): the checks that come before 413 in
    /// the answer order still run, so an unknown id is 404, not 413.
    func oversized(_ head: HTTPRequestHead, id: String) async -> HTTPResponse {
        do {
            let headers = try WebPushHeaders(head.headers, maximumTTL: maximumTTL)
            return await oversized(id: id, headers: headers)
        } catch {
            return reject(error)
        }
    }

    private func oversized(id: String, headers: WebPushHeaders) async -> HTTPResponse {
        do {
            guard SubscriptionID.isWellFormed(id) else { throw PushAPIError.notFound }
            let messageID = Base64URL.encode(SecureRandom.bytes(16))
            _ = try await decide(
                id: id, checkOnly: true, messageID: messageID, ciphertext: [], headers: headers, now: Date())
            throw PushAPIError.tooLarge
        } catch {
            return reject(error)
        }
    }

    /// Runs the hot-path script, filling the cache from Postgres on a miss (at most
    /// once per entry), and turns refusals into `PushAPIError`s.
    private func decide(
        id: String, checkOnly: Bool, messageID: String, ciphertext: [UInt8], headers: WebPushHeaders, now: Date
    ) async throws -> HotPathScript.Decision {
        let acceptedAt = Int64(now.timeIntervalSince1970 * 1000)
        let request = HotPathScript.Request(
            subscriptionID: id, checkOnly: checkOnly, rateLimit: pushRateLimit.limit,
            rateWindowMilliseconds: pushRateLimit.windowMilliseconds, stashLimit: stashLimit,
            stashLifetimeMilliseconds: stashLifetimeMilliseconds, quotaMonth: RedisKeys.quotaMonth(now),
            messageID: messageID, ciphertext: ciphertext, priority: headers.priority,
            expiration: headers.ttl == 0 ? 0 : acceptedAt / 1000 + Int64(headers.ttl), collapseID: headers.topic,
            acceptedAt: acceptedAt)
        let command = HotPathScript.command(request, keys: keys)
        for _ in 0..<4 {
            let decision = try HotPathScript.decision(from: try await hotPath.send(command))
            switch decision {
            case .queued, .stashed, .checked: return decision
            case .notFound: throw PushAPIError.notFound
            case .gone: throw PushAPIError.gone
            case .disabled: throw PushAPIError.pushDisabled
            case .rateLimited(let milliseconds):
                throw PushAPIError.tooManyRequests(retryAfter: Int((milliseconds + 999) / 1000))
            case .quotaExceeded: throw PushAPIError.quotaExceeded
            case .undeliverable: throw PushAPIError.deliveryFailed
            case .cacheMiss(let kind, let entryID):
                try await cache.fill(kind: kind, id: entryID, subscriptionID: id)
            }
        }
        // The cache keeps missing (evicted as fast as it is filled): a storage problem.
        throw PushAPIError.storageUnavailable
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
