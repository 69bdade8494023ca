import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// `DailyCounts` against the real Postgres: when a batch is written.
@Suite struct DailyCountsTests {
    /// A batch is written once it would write `batchSize` rows, not after `batchSize`
    /// outcomes: a burst to one device adds nothing to write and waits for the interval.
    @Test func aBatchIsWrittenAtItsRowCountNotItsOutcomeCount() async throws {
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
        func sent() async throws -> Int64 {
            let rows = try await postgres.query(
                "SELECT sent FROM daily_counts WHERE account_id = \(fixture.accountID) AND app_id = \(fixture.appID)")
            return try rows.first?.decode("sent", as: Int64.self) ?? 0
        }
        func pushed() async throws -> Int64 {
            let rows = try await postgres.query(
                "SELECT count(*) AS n FROM subscriptions WHERE id = ANY(\(ids)) AND last_push_at IS NOT NULL")
            return try rows.first?.decode("n", as: Int64.self) ?? 0
        }

        let counts = DailyCounts(
            postgres: postgres, interval: .seconds(3600), batchSize: 3,
            logger: Logger(component: "worker", minimumLevel: .warning))
        counts.start()
        for _ in 0..<10 { counts.record(.sent, message: message(ids[0])) }
        // Ten outcomes, two rows (one counter, one subscription): not a batch yet.
        try await Task.sleep(for: .milliseconds(400))
        #expect(try await sent() == 0)
        counts.record(.sent, message: message(ids[1]))
        counts.record(.sent, message: message(ids[2]))
        try await eventually("the batch of three subscriptions written") { try await sent() == 12 }
        #expect(try await pushed() == 3)
        await counts.stop()
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
            postgres: postgres, interval: .seconds(3600), logger: Logger(component: "worker", minimumLevel: .warning))
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        func push(after seconds: Double) async throws -> Double? {
            counts.record(.sent, message: message, at: start.addingTimeInterval(seconds))
            await counts.flush()
            return try await lastPush()
        }

        #expect(try await push(after: 0) == start.timeIntervalSince1970)
        #expect(try await push(after: 59) == start.timeIntervalSince1970)
        #expect(try await push(after: 61) == start.timeIntervalSince1970 + 61)
        #expect(try await push(after: 10) == start.timeIntervalSince1970 + 61)
    }

    /// While Postgres cannot be reached, a failed batch is kept for the next try: every
    /// count, but last-push times only up to the limit, so an outage does not grow the
    /// worker's memory with each device pushed.
    @Test func aFailedBatchKeepsItsCountsAndAtMostTheLimitOfLastPushTimes() async throws {
        // Port 1: nothing listens there, so every write is refused.
        let unreachable = PostgresClient(url: "postgresql://pushgate@127.0.0.1:1/pushgate", maximumConnections: 1)
        let counts = DailyCounts(
            postgres: unreachable, interval: .seconds(3600), maximumKeptLastPush: 5,
            logger: Logger(component: "worker", minimumLevel: .error))
        func message(_ device: String) -> QueueMessage {
            QueueMessage(
                messageID: "m", subscriptionID: device, appID: "app", accountID: "account", credentialID: "c",
                topic: "t", deviceToken: "ab", sandbox: false, alertTitle: "t", alertBody: "b", ciphertext: [1],
                priority: 10, expiration: 0, collapseID: nil, acceptedAt: 0, quotaKey: "q")
        }
        for index in 0..<12 { counts.record(.sent, message: message("device-\(index)")) }
        counts.record(.failed, message: message("device-0"))
        let tally = DailyCounts.Tally(sent: 12, failed: 1, gone: 0)
        #expect(Array(counts.pending.tallies.values) == [tally] && counts.pending.lastPushCount == 12)
        #expect(await counts.flush() == false)
        #expect(Array(counts.pending.tallies.values) == [tally] && counts.pending.lastPushCount == 5)
        #expect(await counts.flush() == false)
        #expect(Array(counts.pending.tallies.values) == [tally] && counts.pending.lastPushCount == 5)
        unreachable.close()
    }

    /// A worker stopped while Postgres is away parks the counts it could not write in
    /// Redis, and the next worker that can write takes them over and writes them once.
    @Test func countsAStoppingWorkerCannotWriteAreWrittenByTheNextOne() async throws {
        let setup = try await ParkingSetup()
        defer { setup.close() }
        let logger = Logger(component: "worker", minimumLevel: .error)

        let stopping = DailyCounts(
            postgres: setup.throughRelay, interval: .seconds(3600), parking: setup.parking, logger: logger)
        stopping.start()
        setup.relay.cut()
        for _ in 0..<3 { stopping.record(.sent, message: setup.message) }
        stopping.record(.failed, message: setup.message)
        stopping.record(.gone, message: setup.message)
        await stopping.stop()
        #expect(try await setup.redis.send("HLEN", setup.parking.key).int == 3, "sent, failed and gone parked")
        #expect(try await setup.written() == [0, 0, 0])

        let next = DailyCounts(
            postgres: setup.postgres, interval: .milliseconds(100), parking: setup.parking,
            adoptionInterval: .milliseconds(100),
            logger: logger)
        next.start()
        // Idle, its empty batches say nothing of Postgres: the parked counts stay in Redis.
        try await Task.sleep(for: .milliseconds(400))
        #expect(try await setup.redis.send("HLEN", setup.parking.key).int == 3, "not taken over by an idle worker")
        // A write of its own (another app's) reaches Postgres; then it takes them over.
        let other = try await Fixture.create(setup.postgres)
        var otherMessage = setup.message
        otherMessage.accountID = other.accountID
        otherMessage.appID = other.appID
        next.record(.sent, message: otherMessage)
        try await eventually("the parked counts written by the next worker") { try await setup.written() == [3, 1, 1] }
        #expect(try await setup.redis.send("EXISTS", setup.parking.key).int == 0)
        try await Task.sleep(for: .milliseconds(400))  // a few more adoptions and writes
        #expect(try await setup.written() == [3, 1, 1], "written once")
        await next.stop()
    }

    /// A write that fails parks its counts in Redis at once: a worker that dies while
    /// Postgres is away (no stop, no last flush) leaves them there, not in its memory.
    /// Once Postgres answers again, the worker takes them back and writes them, without
    /// waiting for a send of its own.
    @Test func aFailedWriteParksItsCountsAtOnceAndTheyAreWrittenWhenPostgresIsBack() async throws {
        let setup = try await ParkingSetup()
        defer { setup.close() }
        let counts = DailyCounts(
            postgres: setup.throughRelay, interval: .milliseconds(100), parking: setup.parking,
            adoptionInterval: .seconds(3600),
            logger: Logger(component: "worker", minimumLevel: .error))

        setup.relay.cut()
        for _ in 0..<3 { counts.record(.sent, message: setup.message) }
        counts.record(.failed, message: setup.message)
        counts.record(.gone, message: setup.message)
        #expect(await counts.flush() == false)
        #expect(try await setup.redis.send("HLEN", setup.parking.key).int == 3, "sent, failed and gone parked at once")
        #expect(counts.pending.tallies.isEmpty, "nothing left to lose in memory")

        counts.start()
        try await Task.sleep(for: .milliseconds(300))  // idle, asking a Postgres that is away
        #expect(try await setup.written() == [0, 0, 0])
        #expect(try await setup.redis.send("HLEN", setup.parking.key).int == 3)
        setup.relay.restore()
        try await eventually("the parked counts written once Postgres answers") {
            try await setup.written() == [3, 1, 1]
        }
        #expect(try await setup.redis.send("EXISTS", setup.parking.key).int == 0)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await setup.written() == [3, 1, 1], "written once")
        await counts.stop()
    }
}

/// What the parking tests share: Postgres directly and through a relay they can cut,
/// Redis, a parking hash of their own, and a message of a fresh account and app.
private struct ParkingSetup {
    let relay: TCPRelay
    let postgres: PostgresClient
    let throughRelay: PostgresClient
    let redis: RedisClient
    let fixture: Fixture
    let parking: ParkedCounts
    let message: QueueMessage

    init() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        self.relay = relay
        postgres = PostgresClient(url: TestEnvironment.databaseURL, maximumConnections: 2)
        throughRelay = PostgresClient(url: databaseURL, maximumConnections: 1)
        redis = try RedisClient(url: TestEnvironment.redisURL)
        fixture = try await Fixture.create(postgres)
        let unique = UInt64.random(in: 0...UInt64.max)
        parking = ParkedCounts(
            redis: redis, key: RedisKeys(stream: "q:{p\(unique)}", namespace: "pushgate-test:\(unique)").parkedCounts)
        message = QueueMessage(
            messageID: "m", subscriptionID: "device", appID: fixture.appID, accountID: fixture.accountID,
            credentialID: "c", topic: fixture.topic, deviceToken: "ab", sandbox: false, alertTitle: "t",
            alertBody: "b", ciphertext: [1], priority: 10, expiration: 0, collapseID: nil, acceptedAt: 0, quotaKey: "q")
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
