import Shared

/// Fills the Redis copies the hot-path script reads (`RedisKeys.subscription`,
/// `.app`, `.account`) from Postgres after a cache miss. Each entry is written
/// atomically and expires after the cache lifetime; an unknown subscription gets a
/// short negative entry so unknown ids do not reach Postgres on every push.
struct HotPathCache: Sendable {
    let redis: RedisClient
    let keys: RedisKeys
    let subscriptions: SubscriptionRepository
    let directory: AppDirectory
    let lifetimeMilliseconds: Int64

    var negativeLifetimeMilliseconds: Int64 { min(lifetimeMilliseconds, 60_000) }

    /// Writes a live subscription entry, unless the subscription has a tombstone:
    /// the hot-path script reads the tombstone only when there is no live entry, so
    /// a fill racing the worker's `subscriptionGone` (which sets the tombstone, then
    /// drops the entry) must not leave one behind it.
    ///
    /// KEYS: 1 the subscription's entry, 2 its tombstone. ARGV: 1 lifetime ms, 2… fields.
    static let fillSubscription = RedisScript(
        source: """
            if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
            redis.call('DEL', KEYS[1])
            redis.call('HSET', KEYS[1], unpack(ARGV, 2))
            redis.call('PEXPIRE', KEYS[1], ARGV[1])
            return 1
            """)

    /// Fills the entry the script reported missing. An app or account that no longer
    /// exists means the subscription went with it: its entry is dropped, so the
    /// next attempt finds the subscription gone from Postgres.
    func fill(kind: String, id: String, subscriptionID: String) async throws {
        switch kind {
        case "subscription":
            if let entry = try await subscriptions.cacheEntry(id) {
                let part = QueueMessage.subscriptionPart(
                    appID: entry.appID, topic: entry.topic, deviceToken: entry.deviceToken, sandbox: entry.sandbox,
                    alertTitle: entry.alertTitle, alertBody: entry.alertBody)
                _ = try await redis.run(
                    Self.fillSubscription, keys: [keys.subscription(id), keys.tombstone(id)],
                    arguments: [
                        lifetimeMilliseconds, SubscriptionCacheField.app, entry.appID, SubscriptionCacheField.state,
                        entry.active ? "active" : "pending", SubscriptionCacheField.sandbox, entry.sandbox ? "1" : "0",
                        SubscriptionCacheField.part, part,
                        SubscriptionCacheField.formatOneTopic, entry.topic,
                        SubscriptionCacheField.formatOneToken, entry.deviceToken,
                        SubscriptionCacheField.formatOneTitle, entry.alertTitle,
                        SubscriptionCacheField.formatOneBody, entry.alertBody,
                    ]
                ).throwingError()
            } else {
                try await write(
                    keys.subscription(id), [SubscriptionCacheField.missing, "1"], lifetime: negativeLifetimeMilliseconds
                )
            }
        case "app":
            if let app = try await directory.app(id) {
                try await write(
                    keys.app(id),
                    [
                        AppCacheField.account, app.accountID, AppCacheField.enabled, app.pushEnabled ? "1" : "0",
                        AppCacheField.credential, app.credentialID ?? "", AppCacheField.credentialStatus,
                        app.credentialStatus ?? "",
                    ], lifetime: lifetimeMilliseconds)
            } else {
                _ = try await redis.send("DEL", keys.subscription(subscriptionID))
            }
        case "account":
            if let plan = try await directory.plan(ofAccount: id) {
                let limit = plan.monthlyPushLimit.map(String.init) ?? "-1"
                try await write(
                    keys.account(id), [AccountCacheField.monthlyLimit, limit], lifetime: lifetimeMilliseconds)
            } else {
                _ = try await redis.send("DEL", keys.subscription(subscriptionID))
            }
        default:
            throw RedisError(code: .unexpectedReply, message: "hot-path script reported an unknown cache entry")
        }
    }

    private func write(_ key: String, _ fields: [String], lifetime: Int64) async throws {
        let replies = try await redis.pipeline([
            RedisCommand("MULTI"), RedisCommand("DEL", key), RedisCommand("HSET", arguments: [key] + fields),
            RedisCommand("PEXPIRE", key, lifetime), RedisCommand("EXEC"),
        ])
        for reply in replies { _ = try reply.throwingError() }
    }
}
