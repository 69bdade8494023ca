/// Drops cached copies of Postgres rows from Redis after the rows changed, so the
/// next push fills the cache from Postgres again. The ingress's device endpoints,
/// the admin API and the dispatch worker call it **after** committing the change.
///
/// | after… | call |
/// |---|---|
/// | a subscription's token, alert, sandbox or state changed | `subscriptionChanged(_:)` |
/// | subscriptions' topic changed (their identifier's case was edited) | `subscriptionsChanged(_:)` |
/// | a subscription was activated | `subscriptionActivated(_:)` (drops the stash too) |
/// | subscriptions deleted (by id, by identifier or app removal, by the sweep) | `subscriptionsDeleted(_:)` |
/// | a device token died (APNs 410 / BadDeviceToken) | `subscriptionGone(_:app:)` (adds the 410 tombstone) |
/// | that deletion rolled back, or the device changed after Apple's verdict | `tombstoneWithdrawn(_:app:)` |
/// | an app's push switch or chosen credential changed, the app was deleted | `appChanged(_:)` |
/// | a credential was rejected, restored or deleted | `appChanged(_:)` for each app using it |
/// | an account's plan changed | `accountChanged(_:)` |
///
/// A call that fails after its change was committed is tried again in the
/// background (`retry`), or the old values stay cached for the entries' freshness.
///
/// Each invalidation first moves the entry's generation on (`RedisKeys.cacheGeneration`),
/// then drops the entry. A fill reads the generation before it reads Postgres and
/// writes only if it is unchanged (`HotPathCache`), so a fill that read a row just
/// before the change cannot write the old values back after the invalidation.
public struct CacheInvalidation: Sendable {
    public let redis: RedisClient
    public let keys: RedisKeys
    /// How long a tombstone answers 410 (`TOMBSTONE_TTL_SECONDS`, default 30 days).
    public let tombstoneLifetimeSeconds: Int

    public static let defaultTombstoneLifetimeSeconds = 30 * 86_400
    /// How long a generation outlives its last change: far longer than a fill takes
    /// (one Postgres read). A generation that expired reads as none, which no fill
    /// that read one before can match.
    public static let generationLifetimeSeconds = 600

    public init(redis: RedisClient, keys: RedisKeys, tombstoneLifetimeSeconds: Int = defaultTombstoneLifetimeSeconds) {
        self.redis = redis
        self.keys = keys
        self.tombstoneLifetimeSeconds = tombstoneLifetimeSeconds
    }

    public func subscriptionChanged(_ id: String) async throws {
        try await invalidate([keys.subscription(id)])
    }

    /// `subscriptionChanged(_:)` for many, 500 entries per round trip.
    public func subscriptionsChanged(_ ids: [String]) async throws {
        for batch in Self.batches(of: ids) { try await invalidate(batch.map(keys.subscription)) }
    }

    /// `ids` in slices of 500: one pipeline each.
    private static func batches(of ids: [String]) -> [ArraySlice<String>] {
        stride(from: 0, to: ids.count, by: 500).map { ids[$0..<min($0 + 500, ids.count)] }
    }

    /// Drops the cache entry and the pending stash.
    public func subscriptionActivated(_ id: String) async throws {
        try await invalidate([keys.subscription(id)], alsoDeleting: keys.pendingStash(id), stashesOf: [id])
    }

    /// Drops the cache, the pending stash, the rate window and the topic marks of each
    /// subscription.
    public func subscriptionsDeleted(_ ids: [String]) async throws {
        for batch in Self.batches(of: ids) {
            try await invalidate(
                batch.map(keys.subscription), alsoDeleting: batch.flatMap(keys.subscriptionState),
                stashesOf: Array(batch))
        }
    }

    /// `subscriptionsDeleted([id])` plus a tombstone, so pushes answer 410 instead of 404.
    /// The tombstone holds the subscription's app: App API sends from that app (and
    /// only that app: another app must not learn the id existed) answer `gone`.
    public func subscriptionGone(_ id: String, app: String) async throws {
        _ = try await redis.pipeline([
            RedisCommand("SET", keys.tombstone(id), app, "EX", tombstoneLifetimeSeconds),
            RedisCommand("DEL", arguments: [keys.subscription(id)] + keys.subscriptionState(id)),
            RedisCommand("ZREM", keys.stashesDue, id),
        ]).map { try $0.throwingError() }
    }

    /// Deletes the tombstone of `id` if `app`'s: written before its row's deletion,
    /// which then rolled back, it would answer 410 for a live device for its lifetime
    /// (the cache fills refuse to write over a tombstone). The row is the truth.
    public func tombstoneWithdrawn(_ id: String, app: String) async throws {
        // Only `app`'s: another app's tombstone under the id is not ours to withdraw.
        _ = try await redis.run(.deleteIfHolding, keys: [keys.tombstone(id)], arguments: [app])
    }

    public func appChanged(_ id: String) async throws {
        try await invalidate([keys.app(id)])
    }

    public func accountChanged(_ id: String) async throws {
        try await invalidate([keys.account(id)])
    }

    /// Runs `body`, an invalidation after a committed change. If it fails, it is tried
    /// again in the background (`retry`, for `window`) and the error is rethrown, for
    /// the caller to answer or log: the change is saved whatever happens here.
    public static func afterCommit(
        _ what: String, retryingFor window: Duration, log: InvalidationRetryLog,
        _ body: @escaping @Sendable () async throws -> Void
    ) async throws {
        do {
            try await body()
        } catch {
            Task { await retry(what, body, within: window, log: log) }
            throw error
        }
    }

    /// Tries `body` again after 0.25 s, then at doubling intervals up to 8 s, until it
    /// succeeds or `window` has passed. Invalidations are idempotent, so one that runs
    /// after a later change's own does no harm (one more cache miss at most).
    public static func retry(
        _ what: String, _ body: @Sendable () async throws -> Void, within window: Duration, log: InvalidationRetryLog
    ) async {
        let deadline = ContinuousClock.now + window
        var pause = Duration.milliseconds(250)
        var lastError: any Error = CancellationError()
        while ContinuousClock.now + pause < deadline {
            try? await Task.sleep(for: pause)
            do {
                try await body()
                log.recovered.info("cache invalidation done on a later try", metadata: ["change": what])
                return
            } catch let error as RedisError where error.code == .closed {
                return  // shutting down
            } catch let error as ConnectionPoolError where error.code == .closed {
                return  // shutting down
            } catch {
                lastError = error
            }
            pause = min(pause * 2, .seconds(8))
        }
        log.failed.error(
            "cache invalidation failed; the change takes effect once the cached entries are read again",
            metadata: ["change": what, "error": ThrottledLog.describe(lastError)])
    }

    /// Moves each entry's generation on, then deletes the entries and `others`, in one
    /// pipeline (Redis runs it in order: a fill between the two steps is refused by
    /// the generation, one before them is deleted). A generation is a random value,
    /// not a counter: a counter restarts at 1 once its key expires, and a fill that
    /// read the 1 of an earlier change could match the new one.
    /// `stashesOf`: subscriptions whose stash is deleted here, taken out of the
    /// stash expiry's schedule too (`RedisKeys.stashesDue`), which would otherwise
    /// keep them until their stash's lifetime ends.
    private func invalidate(
        _ entries: [String], alsoDeleting others: [String] = [], stashesOf stashed: [String] = []
    ) async throws {
        guard !entries.isEmpty else { return }
        var commands: [RedisCommand] = []
        commands.reserveCapacity(entries.count + 2)
        for entry in entries {
            commands.append(
                RedisCommand(
                    "SET", keys.cacheGeneration(of: entry), Base64URL.encode(SecureRandom.bytes(12)), "EX",
                    Self.generationLifetimeSeconds))
        }
        commands.append(RedisCommand("DEL", arguments: entries + others))
        if !stashed.isEmpty { commands.append(RedisCommand("ZREM", arguments: [keys.stashesDue] + stashed)) }
        for reply in try await redis.pipeline(commands) { _ = try reply.throwingError() }
    }
}

/// Where retried cache invalidations report, each outcome throttled on its own: a
/// Redis slowdown under busy device traffic (each PUT's invalidation retried) must
/// not become a log line per request. One per component that invalidates.
public struct InvalidationRetryLog: Sendable {
    let recovered: ThrottledLog
    let failed: ThrottledLog

    public init(logger: Logger, interval: Duration = .seconds(5)) {
        recovered = ThrottledLog(logger: logger, interval: interval)
        failed = ThrottledLog(logger: logger, interval: interval)
    }
}
