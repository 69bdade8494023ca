import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// `DailyCounts` and `CountTransfer` against the real Postgres and Redis: when
/// last-push times are written, and how the daily counts reach Postgres exactly once.
@Suite struct DailyCountsTests {
    /// Last-push times are written once they would write `batchSize` rows, not after
    /// `batchSize` pushes: a burst to one device adds nothing to write and waits for the interval.
    @Test func lastPushTimesAreWrittenAtTheirRowCountNotTheirPushCount() async throws {
        let postgres = PostgresClient(url: TestEnvironment.databaseURL, maximumConnections: 2)
        let fixture = try await Fixture.create(postgres)
        let ids = (0..<3).map { _ in Base64URL.encode(SecureRandom.bytes(16)) }
        for id in ids {
            try await postgres.execute(
                """
                INSERT INTO subscriptions (id, app_id, topic, device_token, sandbox, secret_hash, state)
                VALUES (\(id), \(fixture.appID), \(fixture.topic), \(Fixture.token()), false,
                    \(SecureRandom.bytes(32)), 'active')
                """)
        }
        func message(_ id: String) -> QueueMessage {
            QueueMessage(
                messageID: "m", subscriptionID: id, appID: fixture.appID, accountID: fixture.accountID,
                credentialID: "c", topic: fixture.topic, deviceToken: "ab", sandbox: false,
                alertTitle: "t", alertBody: "b", ciphertext: [1], priority: 10, expiration: 0, collapseID: nil,
                acceptedAt: 0, quotaKey: "q")
        }
        func pushed() async throws -> Int64 {
            let rows = try await postgres.query(
                "SELECT count(*) AS n FROM subscriptions WHERE id = ANY(\(ids)) AND last_push_at IS NOT NULL")
            return try rows.first?.decode("n", as: Int64.self) ?? 0
        }

        let counts = DailyCounts(
            postgres: postgres, transfers: [], interval: .seconds(3600), batchSize: 3,
            logger: Logger(component: "worker", minimumLevel: .warning))
        counts.start()
        for _ in 0..<10 { counts.recordSent(message(ids[0])) }
        // Ten pushes, one row: not a batch yet.
        try await Task.sleep(for: .milliseconds(400))
        #expect(try await pushed() == 0)
        counts.recordSent(message(ids[1]))
        counts.recordSent(message(ids[2]))
        try await eventually("the batch of three subscriptions written") { try await pushed() == 3 }
        await counts.stop(waitingAtMost: .seconds(10))
    }

    /// A subscription's last push is kept to the minute: a later push within a minute
    /// of the recorded one rewrites nothing (at scale, one row version per sent push
    /// was most of Postgres's work), a push a minute later or more moves it on, and an
    /// older one never moves it back.
    @Test func lastPushTimesAreRewrittenOnlyAMinuteApart() async throws {
        let postgres = PostgresClient(url: TestEnvironment.databaseURL, maximumConnections: 2)
        let fixture = try await Fixture.create(postgres)
        let id = Base64URL.encode(SecureRandom.bytes(16))
        try await postgres.execute(
            """
            INSERT INTO subscriptions (id, app_id, topic, device_token, sandbox, secret_hash, state)
            VALUES (\(id), \(fixture.appID), \(fixture.topic), \(Fixture.token()), false, \(SecureRandom.bytes(32)), 'active')
            """)
        let message = QueueMessage(
            messageID: "m", subscriptionID: id, appID: fixture.appID, accountID: fixture.accountID,
            credentialID: "c", topic: fixture.topic, deviceToken: "ab", sandbox: false,
            alertTitle: "t", alertBody: "b", ciphertext: [1], priority: 10, expiration: 0, collapseID: nil,
            acceptedAt: 0, quotaKey: "q")
        func lastPush() async throws -> Double? {
            let rows = try await postgres.query(
                "SELECT extract(epoch FROM last_push_at)::float8 AS at FROM subscriptions WHERE id = \(id)")
            return try rows.first?.decode("at", as: Double?.self)
        }
        let counts = DailyCounts(
            postgres: postgres, transfers: [], interval: .seconds(3600),
            logger: Logger(component: "worker", minimumLevel: .warning))
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        func push(after seconds: Double) async throws -> Double? {
            counts.recordSent(message, at: start.addingTimeInterval(seconds))
            await counts.flush()
            return try await lastPush()
        }

        #expect(try await push(after: 0) == start.timeIntervalSince1970)
        #expect(try await push(after: 59) == start.timeIntervalSince1970)
        #expect(try await push(after: 61) == start.timeIntervalSince1970 + 61)
        #expect(try await push(after: 10) == start.timeIntervalSince1970 + 61)
    }

    /// While Postgres cannot be reached (or a write hangs), last-push times wait for
    /// the next try only up to the limit, so an outage does not grow the worker's
    /// memory with each device pushed; a device already waiting still has its time moved on.
    @Test func atMostTheLimitOfLastPushTimesWait() async throws {
        // Port 1: nothing listens there, so every write is refused.
        let unreachable = PostgresClient(url: "postgresql://pushgate@127.0.0.1:1/pushgate", maximumConnections: 1)
        let counts = DailyCounts(
            postgres: unreachable, transfers: [], interval: .seconds(3600), maximumKeptLastPush: 5,
            logger: Logger(component: "worker", minimumLevel: .error))
        func message(_ device: String) -> QueueMessage {
            QueueMessage(
                messageID: "m", subscriptionID: device, appID: "app", accountID: "account", credentialID: "c",
                topic: "t", deviceToken: "ab", sandbox: false, alertTitle: "t", alertBody: "b", ciphertext: [1],
                priority: 10, expiration: 0, collapseID: nil, acceptedAt: 0, quotaKey: "q")
        }
        let first = Date(timeIntervalSince1970: 1_790_000_000)
        for index in 0..<12 { counts.recordSent(message("device-\(index)"), at: first) }
        #expect(counts.pendingLastPushCount == 5)
        #expect(counts.pendingLastPush(of: message("device-11")) == nil)
        counts.recordSent(message("device-0"), at: first.addingTimeInterval(60))
        #expect(counts.pendingLastPushCount == 5)
        #expect(counts.pendingLastPush(of: message("device-0")) == first.addingTimeInterval(60))
        #expect(await counts.flush() == false)
        #expect(counts.pendingLastPushCount == 5)
        #expect(await counts.flush() == false)
        #expect(counts.pendingLastPushCount == 5)
        unreachable.close()
    }

    /// A worker stopping while Postgres does not answer (frozen, a lock) waits for its
    /// last write only as long as it is told: the counts wait in Redis for the next one.
    @Test func stoppingWaitsForAnUnansweredWriteOnlyAsLongAsItIsTold() async throws {
        let setup = try await TransferSetup()
        defer { setup.close() }
        try await setup.add(sent: 2, failed: 0, gone: 0)
        setup.relay.freeze()
        defer { setup.relay.thaw() }
        let counts = DailyCounts(
            postgres: setup.throughRelay, transfers: [setup.transfer(owner: "frozen", through: setup.throughRelay)],
            interval: .milliseconds(100), logger: Logger(component: "worker", minimumLevel: .error))
        counts.start()
        try await Task.sleep(for: .milliseconds(300))  // the first transfer waits on Postgres
        let started = ContinuousClock.now
        await counts.stop(waitingAtMost: .milliseconds(500))
        let took = ContinuousClock.now - started
        #expect(took < .seconds(2), "stopped after \(took)")
        // Kept in Redis (taken for the transfer, or not yet), and written once Postgres answers.
        let waiting = try await setup.redis.send("EXISTS", setup.keys.movingCounts, setup.keys.pendingCounts).int
        #expect(waiting ?? 0 >= 1)
        setup.relay.thaw()
        let next = DailyCounts(
            postgres: setup.postgres, transfers: [setup.transfer(owner: "next", lease: .milliseconds(100))],
            interval: .milliseconds(100), logger: Logger(component: "worker", minimumLevel: .error))
        next.start()
        try await eventually("the counts written") { try await setup.written() == [2, 0, 0] }
        await next.stop(waitingAtMost: .seconds(10))
        #expect(try await setup.written() == [2, 0, 0])
    }

    /// A transfer whose worker died after taking the counts is taken over once its
    /// lease is over, not before; and a transfer applied but not cleared from Redis
    /// (its worker dead before the last step, or the answer lost) adds nothing when
    /// it is run again.
    @Test func aTransferIsTakenOverAfterItsLeaseAndAppliedOnce() async throws {
        let setup = try await TransferSetup()
        defer { setup.close() }
        try await setup.add(sent: 3, failed: 1, gone: 1)
        // A worker that took the counts, then died.
        let taken = try await setup.redis.run(
            CountTransfer.takeScript,
            keys: [setup.keys.pendingCounts, setup.keys.movingCounts, setup.keys.legacyParkedCounts],
            arguments: ["dead-worker", Base64URL.encode(SecureRandom.bytes(16)), 60_000])
        #expect(taken.array?.isEmpty == false)
        let moving = (try await setup.redis.send("HGETALL", setup.keys.movingCounts).array ?? []).compactMap(\.bytes)

        // A worker judges another's lease by the length of its own (10 s in every
        // worker): a minute is not over yet, however slow this machine; 300 ms is, 400 ms on.
        let patient = setup.transfer(owner: "other", lease: .seconds(60))
        #expect(try await patient.run() == 0, "the dead worker's lease is not over")
        #expect(try await setup.written() == [0, 0, 0])
        try await Task.sleep(for: .milliseconds(400))
        let other = setup.transfer(owner: "other", lease: .milliseconds(300))
        #expect(try await other.run() == 1)
        #expect(try await setup.written() == [3, 1, 1])
        #expect(try await setup.redis.send("EXISTS", setup.keys.movingCounts).int == 0)

        // The same transfer once more, as if its clearing had been lost.
        _ = try await setup.redis.send(RedisCommand("HSET", arguments: [Array(setup.keys.movingCounts.utf8)] + moving))
        try await Task.sleep(for: .milliseconds(400))
        #expect(try await other.run() == 1, "taken again")
        #expect(try await setup.written() == [3, 1, 1], "and added once")
        #expect(try await setup.redis.send("EXISTS", setup.keys.movingCounts).int == 0)
    }

    /// Counts a worker of an older release parked in Redis (it could not write them)
    /// are moved with the next transfer, once.
    @Test func countsAnOlderReleaseParkedAreMovedWithTheNextTransfer() async throws {
        let setup = try await TransferSetup()
        defer { setup.close() }
        try await setup.add(sent: 2, failed: 0, gone: 0)
        try await setup.add(sent: 3, failed: 0, gone: 1, to: setup.keys.legacyParkedCounts)
        let transfer = setup.transfer(owner: "upgraded")
        #expect(try await transfer.run() == 1)
        #expect(try await setup.written() == [5, 0, 1])
        #expect(try await setup.redis.send("EXISTS", setup.keys.legacyParkedCounts).int == 0)
        #expect(try await transfer.run() == 0)
        #expect(try await setup.written() == [5, 0, 1])
    }

    /// While Postgres is away, the counts wait in Redis: those a transfer took, and
    /// those acknowledged after, apart. A worker that stops then keeps none in memory;
    /// the next one moves them all, once, when Postgres answers.
    @Test func countsWaitInRedisWhilePostgresIsAwayAndAreWrittenOnceAfter() async throws {
        let setup = try await TransferSetup()
        defer { setup.close() }
        let logger = Logger(component: "worker", minimumLevel: .error)
        try await setup.add(sent: 3, failed: 1, gone: 1)
        setup.relay.cut()
        let stopping = DailyCounts(
            postgres: setup.throughRelay, transfers: [setup.transfer(owner: "stopping", through: setup.throughRelay)],
            interval: .milliseconds(100), logger: logger)
        stopping.start()
        #expect(await stopping.flush() == false)
        try await setup.add(sent: 2, failed: 0, gone: 0)
        await stopping.stop(waitingAtMost: .seconds(10))
        #expect(try await setup.redis.send("HLEN", setup.keys.movingCounts).int ?? 0 > 3, "taken, waiting")
        #expect(try await setup.redis.send("HLEN", setup.keys.pendingCounts).int == 1, "acknowledged after")
        #expect(try await setup.written() == [0, 0, 0])

        setup.relay.restore()
        let next = DailyCounts(
            postgres: setup.postgres, transfers: [setup.transfer(owner: "next", lease: .milliseconds(100))],
            interval: .milliseconds(100), logger: logger)
        next.start()
        try await eventually("every count written") { try await setup.written() == [5, 1, 1] }
        try await Task.sleep(for: .milliseconds(300))  // a few more transfers
        #expect(try await setup.written() == [5, 1, 1], "written once")
        #expect(try await setup.redis.send("EXISTS", setup.keys.movingCounts, setup.keys.pendingCounts).int == 0)
        await next.stop(waitingAtMost: .seconds(10))
    }
}

/// What the transfer tests share: Postgres directly and through a relay they can cut,
/// Redis, a stream key space of their own, and a fresh account and app.
private struct TransferSetup {
    let relay: TCPRelay
    let postgres: PostgresClient
    let throughRelay: PostgresClient
    let redis: RedisClient
    let fixture: Fixture
    let keys: RedisKeys

    init() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        self.relay = relay
        postgres = PostgresClient(url: TestEnvironment.databaseURL, maximumConnections: 2)
        throughRelay = PostgresClient(url: databaseURL, maximumConnections: 1)
        redis = try RedisClient(url: TestEnvironment.redisURL)
        fixture = try await Fixture.create(postgres)
        let unique = UInt64.random(in: 0...UInt64.max)
        keys = RedisKeys(stream: "q:{c\(unique)}", namespace: "pushgate-test:\(unique)")
    }

    func transfer(owner: String, lease: Duration = .seconds(10), through postgres: PostgresClient? = nil)
        -> CountTransfer
    {
        CountTransfer(redis: redis, postgres: postgres ?? self.postgres, keys: keys, owner: owner, lease: lease)
    }

    /// Adds to today's counts of the fixture's app in `hash` (by default the counts
    /// hash, as acknowledgements do).
    func add(sent: Int, failed: Int, gone: Int, to hash: String? = nil) async throws {
        let day = UTCDay.text(of: Date())
        for (kind, amount) in [(DailyCounts.Kind.sent, sent), (.failed, failed), (.gone, gone)] where amount > 0 {
            let field = CounterField.make(account: fixture.accountID, app: fixture.appID, day: day, kind: kind)
            _ = try await redis.send("HINCRBY", hash ?? keys.pendingCounts, field, amount)
        }
    }

    /// The fixture app's written counts: sent, failed, gone.
    func written() async throws -> [Int64] {
        let rows = try await postgres.query(
            """
            SELECT sent, failed, gone FROM daily_counts
            WHERE account_id = \(fixture.accountID) AND app_id = \(fixture.appID)
            """)
        guard let row = rows.first else { return [0, 0, 0] }
        return [
            try row.decode("sent", as: Int64.self), try row.decode("failed", as: Int64.self),
            try row.decode("gone", as: Int64.self),
        ]
    }

    func close() {
        redis.close()
        throughRelay.close()
        postgres.close()
        relay.close()
    }
}

extension DailyCounts {
    /// Records `message` as sent and acknowledged, as the acknowledger does.
    fileprivate func recordSent(_ message: QueueMessage, at date: Date = Date()) {
        let entry = PendingEntry(id: "1-0", context: StreamContext(keys: RedisKeys()), messageCount: 1)
        recordPushes([PendingEntryTests.item(Delivery(entry: entry, message: message), .sent)], at: date)
    }
}
