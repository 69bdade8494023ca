import Shared

/// Per-client-IP limits of the device endpoints: an exact sliding window (a
/// sorted set of request times per key, on the Redis server's clock), so at most
/// `limit` requests are allowed in any window of the configured length, also
/// across minute boundaries.
struct SlidingWindowLimiter: Sendable {
    /// The groups of endpoints that have their own window.
    enum Scope: String, Sendable {
        case registration = "reg"
        case device = "dev"
        /// The App API, keyed by app id.
        case appAPI = "app"
        /// Web Pushes to push URLs neither Redis nor Postgres knows, per client IP.
        case unknownPush = "unk"
        /// App API requests with a key that is not valid, per client IP.
        case appAPIKeyFailures = "akf"
    }

    let redis: RedisClient
    let keys: RedisKeys
    let registration: RateLimit
    let device: RateLimit
    var appAPI = RateLimit(limit: 600, windowSeconds: 60)
    var unknownPush = RateLimit(limit: 600, windowSeconds: 60)
    var appAPIKeyFailures = RateLimit(limit: 60, windowSeconds: 60)

    /// Counts one request of `client`; throws 429 (1006, `Retry-After`) when the window is full.
    func admit(_ scope: Scope, client: String) async throws {
        try await admit(scope, client: client, member: Base64URL.encode(SecureRandom.bytes(12)))
    }

    /// `admit`, counting the request as `member` (unique), so that `forget` can take it
    /// back: a limit on what a request turns out to be is counted before it is known
    /// (so that concurrent requests cannot all pass an empty window) and taken back
    /// for those that turn out not to count.
    func admit(_ scope: Scope, client: String, member: String) async throws {
        let limit = self.limit(of: scope)
        let reply = try await redis.run(
            Self.script, keys: [keys.ipRate(scope.rawValue, client)],
            arguments: [limit.limit, limit.windowMilliseconds, member])
        guard let wait = reply.int else {
            throw RedisError(code: .unexpectedReply, message: "rate limit script answered an unexpected shape")
        }
        if wait > 0 { throw PushAPIError.tooManyRequests(retryAfter: Int((wait + 999) / 1000)) }
    }

    /// Takes back a request `admit(_:client:member:)` counted.
    func forget(_ scope: Scope, client: String, member: String) async throws {
        _ = try await redis.send("ZREM", keys.ipRate(scope.rawValue, client), member).throwingError()
    }

    private func limit(of scope: Scope) -> RateLimit {
        switch scope {
        case .registration: registration
        case .device: device
        case .appAPI: appAPI
        case .unknownPush: unknownPush
        case .appAPIKeyFailures: appAPIKeyFailures
        }
    }

    /// KEYS[1] window; ARGV limit, window ms, unique member. Returns 0 when admitted,
    /// else the milliseconds until enough requests have left the window for one more:
    /// the oldest, or more when the window holds more than the limit (a limit lowered
    /// by configuration, or replicas with different limits during a rollout).
    static let script = RedisScript(
        source: """
            local t = redis.call('TIME')
            local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            local window = tonumber(ARGV[2])
            redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
            local count, limit = redis.call('ZCARD', KEYS[1]), tonumber(ARGV[1])
            if count >= limit then
              local index = count - limit
              local freeing = redis.call('ZRANGE', KEYS[1], index, index, 'WITHSCORES')
              return math.max(tonumber(freeing[2]) + window - now, 1)
            end
            redis.call('ZADD', KEYS[1], now, ARGV[3])
            redis.call('PEXPIRE', KEYS[1], window)
            return 0
            """)
}
