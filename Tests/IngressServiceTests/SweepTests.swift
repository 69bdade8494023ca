import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// The 60-day sweep. Serialized: each sweep deletes every subscription in the shared
/// database not refreshed for the test's maximum age (an hour), so two of these
/// running at once would delete each other's backdated rows. Other suites keep
/// their rows younger than that.
@Suite(.serialized) struct SweepTests {
    @Test func sweepHardDeletesSubscriptionsNotRefreshedForTheMaximumAge() async throws {
        try await IngressTestApp.with(["SUBSCRIPTION_MAX_AGE_SECONDS": "3600"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (stale, _) = try await app.subscribe(topic: fixture.topic)
            let (fresh, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(stale).status == 201)  // cached
            try await app.postgres.execute(
                "UPDATE subscriptions SET last_seen_at = now() - interval '2 hours' WHERE id = \(stale)")
            let deleted = try await app.app.sweeper.sweepOnce()
            #expect((deleted ?? 0) >= 1)
            #expect(try await app.postgres.query("SELECT 1 FROM subscriptions WHERE id = \(stale)").isEmpty)
            #expect(try await app.postgres.query("SELECT 1 FROM subscriptions WHERE id = \(fresh)").count == 1)
            #expect(try await app.push(stale).status == 404)
            // The deletion is recorded for the workers; revocations past their
            // retention are deleted by the sweep, the recent ones kept.
            #expect(try await app.postgres.query("SELECT 1 FROM revocations WHERE id = \(stale)").count == 1)
            let old = "old-\(stale)"
            try await app.postgres.execute(
                """
                INSERT INTO revocations (kind, id, at)
                VALUES ('sub', \(old), now() - make_interval(secs => \(Double(Revocations.retentionSeconds + 60))))
                """)
            try await app.redis.send("DEL", app.keys.lock("sweep"))
            #expect(try await app.app.sweeper.sweepOnce() != nil)
            #expect(try await app.postgres.query("SELECT 1 FROM revocations WHERE id = \(old)").isEmpty)
            #expect(try await app.postgres.query("SELECT 1 FROM revocations WHERE id = \(stale)").count == 1)
            // Another replica (same Redis) does not sweep while the lease is held.
            #expect(try await app.app.sweeper.sweepOnce() == nil)
        }
    }

    /// The lease lasts one `SWEEP_INTERVAL_SECONDS`, also a short one: replicas skip
    /// the interval a sweep ran in, and the next interval sweeps again (a lease of at
    /// least a minute used to stretch a 5 s interval to 60 s).
    @Test func theLeaseLastsOneIntervalEvenAShortOne() async throws {
        try await IngressTestApp.with(["SUBSCRIPTION_MAX_AGE_SECONDS": "3600", "SWEEP_INTERVAL_SECONDS": "1"]) { app in
            #expect(try await app.app.sweeper.sweepOnce() != nil)
            #expect(try await app.app.sweeper.sweepOnce() == nil)
            try await Task.sleep(for: .milliseconds(1300))
            #expect(try await app.app.sweeper.sweepOnce() != nil)
            // A lease taken under a longer interval (a replica before its restart with
            // this one) is cut to this interval by the first replica that finds it.
            _ = try await app.redis.send("SET", app.keys.lock("sweep"), "older", "PX", 3_600_000)
            #expect(try await app.app.sweeper.sweepOnce() == nil)
            #expect((1...1000).contains(try await app.redis.send("PTTL", app.keys.lock("sweep")).int ?? -1))
            try await Task.sleep(for: .milliseconds(1300))
            #expect(try await app.app.sweeper.sweepOnce() != nil)
        }
    }

    /// A sweep longer than an interval (a backlog, a slow Postgres) keeps its lease: it
    /// is renewed after every batch, so another replica does not start a second sweep
    /// over the same rows meanwhile. A batch here waits 0.7 s of the 1 s interval for
    /// row locks; without the renewal the lease would have ~0.3 s left at the end.
    @Test func aSweepRenewsItsLeaseAfterEveryBatch() async throws {
        try await IngressTestApp.with(["SUBSCRIPTION_MAX_AGE_SECONDS": "3600", "SWEEP_INTERVAL_SECONDS": "1"]) { app in
            let stale = try await Self.staleSubscriptions(2, app)
            let sweeper = Self.oneRowPerBatch(app)
            let sweep = try await Self.whileLocked(stale, for: .milliseconds(700), app) {
                try await sweeper.sweepOnce()
            }
            // Its two, and any stale row another test left in the shared database.
            let deleted = try #require(sweep)
            #expect(deleted >= 2)
            #expect(try await app.postgres.query("SELECT 1 FROM subscriptions WHERE id = ANY(\(stale))").isEmpty)
            let left = try await app.redis.send("PTTL", app.keys.lock("sweep")).int ?? -1
            #expect(left > 600, "the lease has \(left) ms left")
            #expect(try await app.app.sweeper.sweepOnce() == nil)
            let metrics = try await app.request("GET", "/metrics")
            #expect(metrics.text.contains("pushgate_ingress_swept_subscriptions_total \(deleted)\n"))
        }
    }

    /// A replica that finds its lease gone after a batch (it outlasted the interval,
    /// and another replica may be sweeping now) stops, leaving the rest to the holder.
    @Test func aSweepThatLostItsLeaseStopsAfterTheBatch() async throws {
        try await IngressTestApp.with(["SUBSCRIPTION_MAX_AGE_SECONDS": "3600", "SWEEP_INTERVAL_SECONDS": "1"]) { app in
            let stale = try await Self.staleSubscriptions(3, app)
            let sweeper = Self.oneRowPerBatch(app)
            let deleted = try await Self.whileLocked(stale, for: .milliseconds(600), app) {
                // Started once the rows are locked: its first batch waits for them.
                let sweep = Task { try await sweeper.sweepOnce() }
                try await Task.sleep(for: .milliseconds(300))  // the sweep waits for a lock meanwhile
                _ = try await app.redis.send("SET", app.keys.lock("sweep"), "another-replica", "PX", 60_000)
                return try await sweep.value
            }
            #expect(deleted == 1)
            let left = try await app.postgres.query("SELECT 1 FROM subscriptions WHERE id = ANY(\(stale))")
            #expect(left.count == 2)
            #expect(try await app.redis.send("GET", app.keys.lock("sweep")) == .bulk(Array("another-replica".utf8)))
            // Not left for the next test's sweep to find.
            try await app.postgres.execute("DELETE FROM subscriptions WHERE id = ANY(\(stale))")
        }
    }

    /// The replica's sweeper, deleting one row per batch (and renewing its lease after each).
    private static func oneRowPerBatch(_ app: IngressTestApp) -> SubscriptionSweeper {
        var sweeper = app.app.sweeper
        sweeper.batchSize = 1
        return sweeper
    }

    /// `count` subscriptions not refreshed for two hours: stale under a maximum age of one.
    private static func staleSubscriptions(_ count: Int, _ app: IngressTestApp) async throws -> [String] {
        let fixture = try await Fixture.create(app.postgres)
        var ids: [String] = []
        for _ in 0..<count { ids.append(try await app.subscribe(topic: fixture.topic).0) }
        try await app.postgres.execute(
            "UPDATE subscriptions SET last_seen_at = now() - interval '2 hours' WHERE id = ANY(\(ids))")
        return ids
    }

    /// Runs `body` while a transaction holds `ids`' row locks, released after `duration`.
    private static func whileLocked<T: Sendable>(
        _ ids: [String], for duration: Duration, _ app: IngressTestApp, _ body: @Sendable () async throws -> T
    ) async throws -> T {
        let (locked, signal) = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await app.postgres.withTransaction { connection in
                _ = try await connection.query("SELECT 1 FROM subscriptions WHERE id = ANY(\(ids)) FOR UPDATE")
                signal.yield()
                try await Task.sleep(for: duration)
            }
        }
        for await _ in locked { break }
        let result = try await body()
        try await holder.value
        return result
    }

    /// A PUT refreshing a stale subscription while the sweep's DELETE waits for the
    /// row's lock keeps the row: the DELETE checks the age again on the row it locks.
    @Test func aSubscriptionRefreshedWhileTheSweepWaitsForItIsKept() async throws {
        try await IngressTestApp.with(["SUBSCRIPTION_MAX_AGE_SECONDS": "3600"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (stale, _) = try await app.subscribe(topic: fixture.topic)
            try await app.postgres.execute(
                "UPDATE subscriptions SET last_seen_at = now() - interval '2 hours' WHERE id = \(stale)")
            let (updated, signal) = AsyncStream<Void>.makeStream()
            let refresh = Task {
                try await app.postgres.withTransaction { connection in
                    try await connection.execute("UPDATE subscriptions SET last_seen_at = now() WHERE id = \(stale)")
                    signal.yield()
                    // Committed after the sweep's DELETE has met the row's lock.
                    try await Task.sleep(for: .milliseconds(500))
                }
            }
            for await _ in updated { break }
            _ = try await app.app.sweeper.sweepOnce()
            try await refresh.value
            #expect(try await app.postgres.query("SELECT 1 FROM subscriptions WHERE id = \(stale)").count == 1)
        }
    }

    /// Redis cannot be reached between the sweep's delete and its invalidation: the
    /// deleted rows' cache entries (which would take pushes for their freshness) are
    /// dropped in the background once it answers again.
    @Test func aSweepWhoseInvalidationFailedDropsTheEntriesOnceRedisAnswers() async throws {
        try await IngressTestApp.with(["SUBSCRIPTION_MAX_AGE_SECONDS": "3600"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (stale, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(stale).status == 201)  // cached
            try await app.postgres.execute(
                "UPDATE subscriptions SET last_seen_at = now() - interval '2 hours' WHERE id = \(stale)")
            let (relay, relayedURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
            defer { relay.close() }
            let cutRedis = try RedisClient(
                url: relayedURL,
                options: .init(connection: .init(connectTimeout: .seconds(1), commandTimeout: .seconds(1))))
            defer { cutRedis.close() }
            relay.cut()
            let live = app.app.sweeper
            let sweeper = SubscriptionSweeper(
                redis: live.redis, keys: live.keys, subscriptions: live.subscriptions,
                invalidation: CacheInvalidation(redis: cutRedis, keys: live.keys), maximumAgeSeconds: 3600,
                interval: live.interval, invalidationRetryWindow: .seconds(60), swept: live.swept, logger: live.logger)
            await #expect(throws: (any Error).self) { try await sweeper.sweepOnce() }
            #expect(try await app.postgres.query("SELECT 1 FROM subscriptions WHERE id = \(stale)").isEmpty)
            #expect(try await app.push(stale).status == 201)  // the entry outlived its row
            relay.restore()
            let answered = try await Poll.until(timeout: .seconds(20), interval: .milliseconds(200)) {
                try await app.push(stale).status == 404
            }
            #expect(answered)
        }
    }
}
