import Shared

/// Fills the Redis copies the hot-path script reads (`RedisKeys.subscription`,
/// `.app`, `.account`) from Postgres after a cache miss. Each entry is written
/// atomically; an unknown subscription gets a short negative entry so unknown ids
/// do not reach Postgres on every push.
///
/// An entry is fresh for the cache lifetime (`CACHE_TTL_SECONDS`), then read again
/// from Postgres; it lives on for the stale lifetime (`CACHE_STALE_TTL_SECONDS`)
/// after that, so that while Postgres cannot be read the pushes to known devices are
/// still accepted, from the entry as last read, instead of all failing once their
/// entries' lifetime runs out.
struct HotPathCache: Sendable {
    let redis: RedisClient
    let keys: RedisKeys
    let subscriptions: SubscriptionRepository
    let directory: AppDirectory
    let lifetimeMilliseconds: Int64
    let staleLifetimeMilliseconds: Int64
    /// Says, now and then, that stale entries are in use.
    let staleLog: ThrottledLog?
    /// Counts the refreshes that kept a stale entry (`IngressMetrics.cacheRefreshFailures`).
    let refreshFailureCount: Counter.Series?
    /// Set when a refresh of a stale entry failed: until Postgres answers again (a
    /// probe in the background), stale entries are kept without asking it. An
    /// unreachable or frozen Postgres costs each attempt its wait, which would
    /// otherwise hold up, now and then, a push whose entry went stale.
    let refreshPause: PostgresPause
    /// How long a push waits for its stale entry to be read again before it is
    /// accepted from the stale one.
    static let staleRefreshWait: Duration = .milliseconds(500)
    /// How long a push waits on the fill of a missing entry, which it cannot do
    /// without, before answering 503 (1005): as long as a device request waits on
    /// storage (`DeviceRoutes.storageWait`). Pushes to a subscription not cached would
    /// otherwise wait, connections held, as long as a frozen Postgres does.
    static let missingFillWait: Duration = DeviceRoutes.storageWait

    init(
        redis: RedisClient, keys: RedisKeys, subscriptions: SubscriptionRepository, directory: AppDirectory,
        lifetimeMilliseconds: Int64, staleLifetimeMilliseconds: Int64 = 0, staleLog: ThrottledLog? = nil,
        refreshFailureCount: Counter.Series? = nil
    ) {
        self.redis = redis
        self.keys = keys
        self.subscriptions = subscriptions
        self.directory = directory
        self.lifetimeMilliseconds = lifetimeMilliseconds
        self.staleLifetimeMilliseconds = staleLifetimeMilliseconds
        self.staleLog = staleLog
        self.refreshFailureCount = refreshFailureCount
        refreshPause = PostgresPause(postgres: subscriptions.postgres)
    }

    var negativeLifetimeMilliseconds: Int64 { min(lifetimeMilliseconds, 60_000) }
    /// How long a filled entry's key lives: fresh, then stale.
    var entryLifetimeMilliseconds: Int64 { lifetimeMilliseconds + staleLifetimeMilliseconds }

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
    /// The entry's `fresh` (`SubscriptionCacheField.fresh`) is set here from the Redis
    /// server's clock, the one the hot-path script compares it with.
    ///
    /// KEYS: 1 the entry, 2 its generation, 3 (subscriptions) its tombstone.
    /// ARGV: 1 the generation the fill read ('' for none), 2 the key's lifetime ms,
    /// 3 how long it is fresh, ms ('' for an entry without freshness), 4… fields.
    static let fillEntry = RedisScript(
        source: """
            if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then return 0 end
            if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
            redis.call('DEL', KEYS[1])
            redis.call('HSET', KEYS[1], unpack(ARGV, 4))
            if ARGV[3] ~= '' then
              local t = redis.call('TIME')
              local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
              redis.call('HSET', KEYS[1], 'fresh', tostring(now + tonumber(ARGV[3])))
            end
            redis.call('PEXPIRE', KEYS[1], ARGV[2])
            return 1
            """)

    /// Reads again from Postgres the entry the hot-path script reported missing or
    /// stale for `request` (`fill`), so that its next run finds it. A stale entry that
    /// cannot be read again (or not within `staleRefreshWait`) stays in use: the next
    /// run allows stale entries (`HotPathScript.Request.allowsStaleCache`), and so do
    /// the other pushes', without asking Postgres, until it answers again
    /// (`refreshPause`). A missing one has nothing to fall back on, so the error (or
    /// `TimeLimitExceeded` after `missingFillWait`) is thrown. False when Postgres has
    /// no such subscription (a negative entry now says so).
    @discardableResult
    func refresh(
        kind: String, id: String, stale: Bool, for request: inout HotPathScript.Request
    ) async throws -> Bool {
        if stale && refreshPause.isPaused {
            refreshFailureCount?.increment()
            request.allowsStaleCache = true
            return true
        }
        // A fill that has not answered within its wait (a frozen Postgres, a lock)
        // counts as failed, and goes on to store its answer. With a stale entry to
        // fall back on, the push need not wait long.
        let subscriptionID = request.subscriptionID
        do {
            return try await withTimeLimit(stale ? Self.staleRefreshWait : Self.missingFillWait) { [self] in
                try await fill(kind: kind, id: id, subscriptionID: subscriptionID)
            }
        } catch let error where stale {
            refreshPause.failed()
            refreshFailureCount?.increment()
            staleLog?.warning("cache entries past their lifetime stay in use: they cannot be read again", error: error)
            request.allowsStaleCache = true
            return true
        }
    }

    /// Fills the entry the script reported missing; false when it is a subscription
    /// Postgres does not have. An app or account that no longer exists means the
    /// subscription went with it: its entry is dropped, so the next attempt finds the
    /// subscription gone from Postgres.
    @discardableResult
    func fill(kind: String, id: String, subscriptionID: String) async throws -> Bool {
        switch kind {
        case "subscription":
            let generation = try await self.generation(of: keys.subscription(id))
            let entry = try await subscriptions.cacheEntry(id)
            try await store(subscription: id, entry, generation: generation)
            return entry != nil
        case "app":
            let generation = try await self.generation(of: keys.app(id))
            if let app = try await directory.app(id) {
                try await store(
                    keys.app(id),
                    [
                        AppCacheField.account, app.accountID, AppCacheField.enabled, app.pushEnabled ? "1" : "0",
                        AppCacheField.credential, app.credentialID ?? "", AppCacheField.credentialStatus,
                        app.credentialStatus ?? "",
                    ], lifetime: entryLifetimeMilliseconds, freshness: lifetimeMilliseconds, generation: generation)
            } else {
                _ = try await redis.send("DEL", keys.subscription(subscriptionID))
            }
        case "account":
            let generation = try await self.generation(of: keys.account(id))
            if let plan = try await directory.plan(ofAccount: id) {
                let limit = plan.monthlyPushLimit.map(String.init) ?? "-1"
                try await store(
                    keys.account(id), [AccountCacheField.monthlyLimit, limit], lifetime: entryLifetimeMilliseconds,
                    freshness: lifetimeMilliseconds, generation: generation)
            } else {
                _ = try await redis.send("DEL", keys.subscription(subscriptionID))
            }
        default:
            throw RedisError(code: .unexpectedReply, message: "hot-path script reported an unknown cache entry")
        }
        return true
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
                freshness: nil, generation: generation)
        }
        let part = QueueMessage.subscriptionPart(
            appID: entry.appID, topic: entry.topic, deviceToken: entry.deviceToken, sandbox: entry.sandbox,
            alertTitle: entry.alertTitle, alertBody: entry.alertBody)
        let fields: [any RedisValueConvertible] = [
            SubscriptionCacheField.part, part, SubscriptionCacheField.context,
            SubscriptionCacheField.contextValue(active: entry.active, sandbox: entry.sandbox, appID: entry.appID),
        ]
        return try await store(
            keys.subscription(id), fields, lifetime: entryLifetimeMilliseconds, freshness: lifetimeMilliseconds,
            generation: generation, tombstone: keys.tombstone(id))
    }

    @discardableResult
    private func store(
        _ key: String, _ fields: [any RedisValueConvertible], lifetime: Int64, freshness: Int64?,
        generation: String, tombstone: String? = nil
    ) async throws -> Bool {
        var keyArguments: [any RedisValueConvertible] = [key, keys.cacheGeneration(of: key)]
        if let tombstone { keyArguments.append(tombstone) }
        let reply = try await redis.run(
            Self.fillEntry, keys: keyArguments,
            arguments: [generation, lifetime, freshness.map(String.init) ?? ""] + fields
        ).throwingError()
        return reply.int == 1
    }
}
