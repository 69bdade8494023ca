/// Whether Redis may evict keys under memory pressure. Queued pushes, quota counters,
/// tombstones and rate windows live in Redis, and any evicting `maxmemory-policy`
/// would drop them silently; with `noeviction` (Redis's default) a full Redis refuses
/// writes instead, and pushes are answered 5xx, never a false 201. Both services check
/// it at start and warn, since the setting belongs to whoever runs Redis.
public enum RedisEvictionPolicy {
    public enum Finding: Sendable, Equatable {
        case noEviction
        /// The policy in force, which may evict.
        case evicting(String)
        /// `CONFIG GET` was refused or failed (managed services often disable it).
        case unknown(reason: String)
    }

    public static func check(_ redis: RedisClient) async -> Finding {
        do {
            let reply = try await redis.send("CONFIG", "GET", "maxmemory-policy")
            // [name, value] (the client speaks RESP2).
            guard let items = reply.array, items.count >= 2, let policy = items[1].string else {
                return .unknown(reason: "unexpected CONFIG GET reply")
            }
            return policy == "noeviction" ? .noEviction : .evicting(policy)
        } catch {
            return .unknown(reason: "\(error)")
        }
    }

    /// Checks and logs what an operator should know: a warning for an evicting policy.
    public static func report(_ redis: RedisClient, logger: Logger) async {
        switch await check(redis) {
        case .noEviction:
            break
        case .evicting(let policy):
            logger.warning(
                "Redis may evict keys: queued pushes, quota counters and tombstones can be lost; set maxmemory-policy noeviction",
                metadata: ["maxmemory-policy": policy])
        case .unknown(let reason):
            logger.info(
                "cannot read Redis's maxmemory-policy; it must be noeviction", metadata: ["reason": reason])
        }
    }
}
