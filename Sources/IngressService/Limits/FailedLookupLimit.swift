import Shared

/// Per client IP, the Postgres lookups that found nothing: Web Pushes to push URLs
/// neither Redis nor Postgres knows (`RATE_LIMIT_UNKNOWN_PUSH`), App API keys that are
/// not valid (`RATE_LIMIT_APP_API_KEY_FAILURES`). Each costs a Postgres read, so a
/// flood of made-up URLs or guessed keys would otherwise keep Postgres busy for
/// everyone: past the limit, the address's lookups are refused (429, 1006) before
/// Postgres is asked.
///
/// A lookup counts from its start (so a burst of concurrent ones cannot all pass an
/// empty window) and is taken back (`release`) when it finds what it looked for, or
/// could not tell. Requests that need no lookup are never held up.
struct FailedLookupLimit: Sendable {
    let limiter: SlidingWindowLimiter
    let scope: SlidingWindowLimiter.Scope
    let clientIP: ClientIPResolver

    /// One lookup counted in its client's window.
    struct Lookup: Sendable {
        let client: String
        let member: String
    }

    /// Counts a lookup of `head`'s client; throws 429 when its window is full.
    func admit(_ head: HTTPRequestHead) async throws -> Lookup {
        let lookup = Lookup(client: clientIP.clientKey(head), member: Base64URL.encode(SecureRandom.bytes(12)))
        try await limiter.admit(scope, client: lookup.client, member: lookup.member)
        return lookup
    }

    /// The lookup found what it looked for (or could not tell): it does not count.
    func release(_ lookup: Lookup) async {
        // Best effort: failing, it only counts against its client until the window moves on.
        try? await limiter.forget(scope, client: lookup.client, member: lookup.member)
    }
}
