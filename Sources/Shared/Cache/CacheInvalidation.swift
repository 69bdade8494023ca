/// Drops cached copies of Postgres rows from Redis after the rows changed, so the
/// next push fills the cache from Postgres again. The ingress's device endpoints,
/// the admin API and the dispatch worker call it **after** committing the change.
///
/// | after… | call |
/// |---|---|
/// | a subscription's token, alert, sandbox or state changed | `subscriptionChanged(_:)` |
/// | subscriptions deleted (by id, by identifier or app removal, by the sweep) | `subscriptionsDeleted(_:)` |
/// | a device token died (APNs 410 / BadDeviceToken) | `subscriptionGone(_:)` (adds the 410 tombstone) |
/// | an app's push switch or chosen credential changed, the app was deleted | `appChanged(_:)` |
/// | a credential was rejected, restored or deleted | `appChanged(_:)` for each app using it |
/// | an account's plan changed | `accountChanged(_:)` |
///
/// A push that filled the cache from a row read just before the change may write
/// the old values back after the invalidation; such an entry lives at most the
/// cache lifetime (`CACHE_TTL_SECONDS`).
public struct CacheInvalidation: Sendable {
    public let redis: RedisClient
    public let keys: RedisKeys
    /// How long a tombstone answers 410 (`TOMBSTONE_TTL_SECONDS`, default 30 days).
    public let tombstoneLifetimeSeconds: Int

    public static let defaultTombstoneLifetimeSeconds = 30 * 86_400

    public init(redis: RedisClient, keys: RedisKeys, tombstoneLifetimeSeconds: Int = defaultTombstoneLifetimeSeconds) {
        self.redis = redis
        self.keys = keys
        self.tombstoneLifetimeSeconds = tombstoneLifetimeSeconds
    }

    public func subscriptionChanged(_ id: String) async throws {
        _ = try await redis.send("DEL", keys.subscription(id))
    }

    /// Drops the cache, the pending stash and the rate window of each subscription.
    public func subscriptionsDeleted(_ ids: [String]) async throws {
        guard !ids.isEmpty else { return }
        for batch in stride(from: 0, to: ids.count, by: 500).map({ ids[$0..<min($0 + 500, ids.count)] }) {
            var arguments: [any RedisValueConvertible] = []
            for id in batch { arguments += [keys.subscription(id), keys.stash(id), keys.pushRate(id)] }
            _ = try await redis.send(RedisCommand("DEL", arguments: arguments))
        }
    }

    /// `subscriptionsDeleted([id])` plus a tombstone, so pushes answer 410 instead of 404.
    public func subscriptionGone(_ id: String) async throws {
        _ = try await redis.pipeline([
            RedisCommand("SET", keys.tombstone(id), "1", "EX", tombstoneLifetimeSeconds),
            RedisCommand("DEL", keys.subscription(id), keys.stash(id), keys.pushRate(id)),
        ]).map { try $0.throwingError() }
    }

    public func appChanged(_ id: String) async throws {
        _ = try await redis.send("DEL", keys.app(id))
    }

    public func accountChanged(_ id: String) async throws {
        _ = try await redis.send("DEL", keys.account(id))
    }
}
