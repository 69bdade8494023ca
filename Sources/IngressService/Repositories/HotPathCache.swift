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

    /// The most hot-path script runs one push may take: its subscription, app and
    /// account entries may all be missing (a fill each), one fill may be refused by a
    /// change made meanwhile, and the last run decides. More means the cache keeps
    /// missing (evicted as fast as it is filled): a storage problem.
    static let maximumScriptRuns = 5

    /// Writes a cache entry, unless it changed since the fill began or (for a
    /// subscription) the subscription has a tombstone:
    /// - a fill reads the entry's generation before Postgres, and every invalidation
    ///   moves it on before deleting the entry (`CacheInvalidation`), so a fill that
    ///   read a row just before a change cannot write the old values back after it;
    /// - the hot-path script reads the tombstone only when there is no live entry, so
    ///   a fill racing the worker's `subscriptionGone` (which sets the tombstone, then
    ///   drops the entry) must not leave one behind it.
    ///
    /// KEYS: 1 the entry, 2 its generation, 3 (subscriptions) its tombstone.
    /// ARGV: 1 the generation the fill read ('' for none), 2 lifetime ms, 3… fields.
    static let fillEntry = RedisScript(
        source: """
            if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then return 0 end
            if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
            redis.call('DEL', KEYS[1])
            redis.call('HSET', KEYS[1], unpack(ARGV, 3))
            redis.call('PEXPIRE', KEYS[1], ARGV[2])
            return 1
            """)

    /// Fills the entry the script reported missing. An app or account that no longer
    /// exists means the subscription went with it: its entry is dropped, so the
    /// next attempt finds the subscription gone from Postgres.
    func fill(kind: String, id: String, subscriptionID: String) async throws {
        switch kind {
        case "subscription":
            let generation = try await self.generation(of: keys.subscription(id))
            try await store(subscription: id, try await subscriptions.cacheEntry(id), generation: generation)
        case "app":
            let generation = try await self.generation(of: keys.app(id))
            if let app = try await directory.app(id) {
                try await store(
                    keys.app(id),
                    [
                        AppCacheField.account, app.accountID, AppCacheField.enabled, app.pushEnabled ? "1" : "0",
                        AppCacheField.credential, app.credentialID ?? "", AppCacheField.credentialStatus,
                        app.credentialStatus ?? "",
                    ], lifetime: lifetimeMilliseconds, generation: generation)
            } else {
                _ = try await redis.send("DEL", keys.subscription(subscriptionID))
            }
        case "account":
            let generation = try await self.generation(of: keys.account(id))
            if let plan = try await directory.plan(ofAccount: id) {
                let limit = plan.monthlyPushLimit.map(String.init) ?? "-1"
                try await store(
                    keys.account(id), [AccountCacheField.monthlyLimit, limit], lifetime: lifetimeMilliseconds,
                    generation: generation)
            } else {
                _ = try await redis.send("DEL", keys.subscription(subscriptionID))
            }
        default:
            throw RedisError(code: .unexpectedReply, message: "hot-path script reported an unknown cache entry")
        }
    }

    /// The entry's generation now ('' for none); read before the row is.
    func generation(of entryKey: String) async throws -> String {
        try await redis.send("GET", keys.cacheGeneration(of: entryKey)).throwingError().string ?? ""
    }

    /// Writes subscription `id`'s entry from `entry` as read from Postgres (nil: no
    /// such subscription, a short negative entry). False when the entry was not
    /// written (changed since `generation` was read, or a tombstone).
    @discardableResult
    func store(
        subscription id: String, _ entry: SubscriptionRepository.CacheEntry?, generation: String
    ) async throws -> Bool {
        guard let entry else {
            return try await store(
                keys.subscription(id), [SubscriptionCacheField.missing, "1"], lifetime: negativeLifetimeMilliseconds,
                generation: generation)
        }
        let part = QueueMessage.subscriptionPart(
            appID: entry.appID, topic: entry.topic, deviceToken: entry.deviceToken, sandbox: entry.sandbox,
            alertTitle: entry.alertTitle, alertBody: entry.alertBody)
        let fields: [any RedisValueConvertible] = [
            SubscriptionCacheField.app, entry.appID, SubscriptionCacheField.state, entry.active ? "active" : "pending",
            SubscriptionCacheField.sandbox, entry.sandbox ? "1" : "0", SubscriptionCacheField.part, part,
            SubscriptionCacheField.context,
            SubscriptionCacheField.contextValue(active: entry.active, sandbox: entry.sandbox, appID: entry.appID),
            SubscriptionCacheField.formatOneTopic, entry.topic, SubscriptionCacheField.formatOneToken,
            entry.deviceToken, SubscriptionCacheField.formatOneTitle, entry.alertTitle,
            SubscriptionCacheField.formatOneBody, entry.alertBody,
        ]
        return try await store(
            keys.subscription(id), fields, lifetime: lifetimeMilliseconds, generation: generation,
            tombstone: keys.tombstone(id))
    }

    @discardableResult
    private func store(
        _ key: String, _ fields: [any RedisValueConvertible], lifetime: Int64, generation: String,
        tombstone: String? = nil
    ) async throws -> Bool {
        var keyArguments: [any RedisValueConvertible] = [key, keys.cacheGeneration(of: key)]
        if let tombstone { keyArguments.append(tombstone) }
        let reply = try await redis.run(
            Self.fillEntry, keys: keyArguments, arguments: [generation, lifetime] + fields
        ).throwingError()
        return reply.int == 1
    }
}
