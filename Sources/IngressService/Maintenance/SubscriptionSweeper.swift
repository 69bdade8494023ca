import Shared

/// Hard-deletes subscriptions not refreshed for `SUBSCRIPTION_MAX_AGE_SECONDS`
/// (60 days by default), every `SWEEP_INTERVAL_SECONDS`, on one replica at a time:
/// a replica sweeps only while it holds the Redis lease `lock:sweep`, which it renews
/// after every batch (a backlog can take longer than an interval to delete). It also
/// deletes the revocations the workers no longer read (`Revocations`).
struct SubscriptionSweeper: Sendable {
    /// Rows deleted per statement (and per lease renewal).
    var batchSize = 1000

    let redis: RedisClient
    let keys: RedisKeys
    let subscriptions: SubscriptionRepository
    let invalidation: CacheInvalidation
    let maximumAgeSeconds: Int
    let interval: Duration
    /// How long the cache invalidation of deleted rows is tried again after it
    /// failed: the entries' freshness (`CACHE_TTL_SECONDS`), after which a push reads
    /// the row again and finds it gone.
    var invalidationRetryWindow: Duration = .seconds(300)
    /// Subscriptions deleted, counted per batch as it commits: a sweep cut short by a
    /// stop or a failure is counted as far as it got.
    let swept: Counter.Series
    let logger: Logger

    /// Sweeps once if no other replica is sweeping; the number of subscriptions
    /// deleted, or nil when another replica holds the lease.
    func sweepOnce() async throws -> Int? {
        let token = Base64URL.encode(SecureRandom.bytes(16))
        // One interval: replicas that find it held skip their turn, so the table is
        // swept once per interval whatever the number of replicas.
        let lease = max(Int(interval.components.seconds), 1) * 1000
        let acquired = try await redis.send("SET", keys.lock("sweep"), token, "NX", "PX", lease)
        guard acquired == .status("OK") else {
            // A lease taken under a longer interval (before a restart with a shorter
            // one) ends no later than this interval would have it (LT: only shortened).
            _ = try? await redis.send("PEXPIRE", keys.lock("sweep"), lease, "LT")  // Redis 7 on
            return nil
        }
        var deleted = 0
        do {
            while true {
                let ids = try await subscriptions.deleteStale(
                    maximumAgeSeconds: maximumAgeSeconds, limit: batchSize)
                deleted += ids.count
                swept.increment(by: Double(ids.count))  // committed, whatever Redis does next
                // The rows are gone and no later sweep finds their ids again: if Redis
                // fails now, their cache entries (which take pushes), stashes and windows
                // are dropped in the background once it answers.
                try await CacheInvalidation.afterCommit(
                    "swept subscriptions", retryingFor: invalidationRetryWindow,
                    log: InvalidationRetryLog(logger: logger)
                ) { [invalidation] in try await invalidation.subscriptionsDeleted(ids) }
                if ids.count < batchSize { break }
                // Before each further batch the lease is set to one interval from now, so
                // replicas still skip about an interval after the sweep ends; a replica
                // that lost it stops, as another one may be sweeping now.
                let renewed = try await redis.run(Self.renew, keys: [keys.lock("sweep")], arguments: [token, lease])
                guard renewed == .integer(1) else {
                    logger.warning(
                        "sweep lease lost (a batch took longer than SWEEP_INTERVAL_SECONDS); stopping this sweep",
                        metadata: ["deleted": String(deleted)])
                    return deleted
                }
            }
        } catch {
            _ = try? await redis.run(.deleteIfHolding, keys: [keys.lock("sweep")], arguments: [token])
            throw error
        }
        // Apart from the sweep proper: its failure leaves rows the workers ignore anyway
        // (they hold `Revocations.retentionSeconds`), and is tried again next interval.
        do {
            _ = try await Revocations.prune(subscriptions.postgres)
        } catch {
            logger.warning("cannot delete old revocations", metadata: ["error": ThrottledLog.describe(error)])
        }
        // The lease is kept until it expires, so other replicas skip this interval.
        return deleted
    }

    /// Sweeps every `interval` until cancelled.
    func run() async {
        while !Task.isCancelled {
            do {
                if let deleted = try await sweepOnce(), deleted > 0 {
                    logger.info("swept stale subscriptions", metadata: ["deleted": String(deleted)])
                }
            } catch {
                logger.warning("subscription sweep failed", metadata: ["error": ThrottledLog.describe(error)])
            }
            try? await Task.sleep(for: interval)
        }
    }

    /// Extends the lease to ARGV[2] ms from now only if it is still ours (ARGV[1]): 1 if so.
    static let renew = RedisScript(
        source: """
            if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
            return 0
            """)
}
