import Shared

/// Per client IP, the Web Pushes to push URLs that neither Redis nor Postgres knows
/// (`RATE_LIMIT_UNKNOWN_PUSH`). Each such push costs a Postgres read (then a minute's
/// negative cache entry), so a flood of made-up push URLs would otherwise keep
/// Postgres busy for everyone: past the limit, an address's pushes that would need
/// Postgres to find their subscription are refused (429, 1006) before it is asked.
/// A lookup counts from its start (so a burst of concurrent ones cannot all pass an
/// empty window) and is taken back when it finds the subscription. Pushes to
/// subscriptions Redis knows are never held up.
struct UnknownPushLimit: Sendable {
    let limiter: SlidingWindowLimiter
    let clientIP: ClientIPResolver

    /// One lookup counted in its client's window.
    struct Lookup: Sendable {
        let client: String
        let member: String
    }

    /// Counts a lookup of `head`'s client; throws 429 when its window is full.
    func admit(_ head: HTTPRequestHead) async throws -> Lookup {
        let lookup = Lookup(client: clientIP.clientKey(head), member: Base64URL.encode(SecureRandom.bytes(12)))
        try await limiter.admit(.unknownPush, client: lookup.client, member: lookup.member)
        return lookup
    }

    /// The lookup found its subscription (or could not tell): it does not count.
    func release(_ lookup: Lookup) async {
        // Best effort: failing, it only counts against its client until the window moves on.
        try? await limiter.forget(.unknownPush, client: lookup.client, member: lookup.member)
    }
}
