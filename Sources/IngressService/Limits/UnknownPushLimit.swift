import Shared

/// Per client IP, the Web Pushes to push URLs that neither Redis nor Postgres knows
/// (`RATE_LIMIT_UNKNOWN_PUSH`). Each such push costs a Postgres read (then a minute's
/// negative cache entry), so a flood of made-up push URLs would otherwise keep
/// Postgres busy for everyone: past the limit, an address's pushes that would need
/// Postgres to find their subscription are refused (429, 1006) before it is asked.
/// Pushes to subscriptions Redis knows are never held up.
struct UnknownPushLimit: Sendable {
    let limiter: SlidingWindowLimiter
    let clientIP: ClientIPResolver

    /// Throws 429 when `head`'s client has used up its unknown pushes.
    func checkBeforeLookup(_ head: HTTPRequestHead) async throws {
        try await limiter.check(.unknownPush, client: clientIP.clientKey(head))
    }

    /// Counts a push of `head`'s client that found no subscription.
    func recordUnknown(_ head: HTTPRequestHead) async {
        // Best effort: the answer (404) stands whether or not it was counted.
        try? await limiter.record(.unknownPush, client: clientIP.clientKey(head))
    }
}
