import Shared

/// Removes stashed messages once their lifetime (the shorter of their TTL and
/// `STASH_TTL_SECONDS`) ends. A stash list's own expiry follows its newest message,
/// so without this an older message, or one with a short TTL, would stay in Redis
/// until the newest's lifetime ended too, though no longer served. The hot-path
/// script notes in `stashesDue` when each stash's first message ends; every ingress
/// runs this each second (the work is idempotent and, with nothing due, one
/// sorted-set read).
struct StashExpiry: Sendable {
    let redis: RedisClient
    let keys: RedisKeys
    let lifetimeMilliseconds: Int64
    let interval: Duration
    let logger: Logger

    /// Stashes handled per run; more due wait for the next second.
    static let batch = 500

    func run() async {
        let failures = ThrottledLog(logger: logger, interval: .seconds(60))
        while !Task.isCancelled {
            do {
                try await removeExpired()
            } catch {
                failures.warning("cannot remove expired stashed messages; retrying", error: error)
            }
            try? await Task.sleep(for: interval)
        }
    }

    /// Removes what is due now; returns how many stashes it looked at.
    @discardableResult
    func removeExpired() async throws -> Int {
        let reply = try await redis.run(
            Self.script, keys: [keys.stashesDue], arguments: [keys.prefix, lifetimeMilliseconds, Self.batch]
        ).throwingError()
        return Int(reply.int ?? 0)
    }

    /// KEYS: 1 the due set. ARGV: 1 key prefix, 2 lifetime ms, 3 batch. For each
    /// stash due: its messages past their lifetime are dropped (an entry's time plus
    /// the lifetime is its end, `HotPathScript`), then it is due again when the first
    /// of the rest ends, or, empty, leaves the set with its topics. Keys are built
    /// from the prefix, in the due set's hash tag.
    static let script = RedisScript(
        source: """
            local t = redis.call('TIME')
            local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            local prefix, lifetime = ARGV[1], tonumber(ARGV[2])
            local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
            for _, id in ipairs(due) do
              local stash = prefix .. 'stash:' .. id
              local oldest
              for _, stashed in ipairs(redis.call('LRANGE', stash, 0, -1)) do
                local start = tonumber(string.match(stashed, '^%d+'))
                if start and start + lifetime <= now then
                  redis.call('LREM', stash, 1, stashed)
                elseif start and (not oldest or start < oldest) then
                  oldest = start
                end
              end
              if oldest then
                redis.call('ZADD', KEYS[1], tostring(oldest + lifetime), id)
              else
                redis.call('ZREM', KEYS[1], id)
                redis.call('DEL', stash .. ':topics')
              end
            end
            return #due
            """)
}
