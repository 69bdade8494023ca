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
                interval: live.interval, invalidationRetryWindow: .seconds(60), logger: live.logger)
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
