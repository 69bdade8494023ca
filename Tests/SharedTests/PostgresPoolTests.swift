import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Shared

@Suite struct PostgresPoolTests {
    static func uniqueApplicationName(_ purpose: String) -> String {
        "pushgate-test-\(purpose)-\(UInt32.random(in: 0...UInt32.max))"
    }

    /// Connections the server has for `applicationName`, counted from outside the pool.
    static func serverSideConnections(_ applicationName: String) async throws -> Int {
        let observer = try await PostgresConnection.connect(url: TestEnvironment.databaseURL)
        defer { observer.close() }
        let rows = try await observer.query(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = \(applicationName)")
        return try rows[0].decode("n", as: Int.self)
    }

    @Test func sixteenTasksShareFourConnectionsWithoutErrorsOrLeaks() async throws {
        let name = Self.uniqueApplicationName("hammer")
        let client = PostgresClient(
            url: TestEnvironment.databaseURL, applicationName: name, maximumConnections: 4,
            acquireTimeout: .seconds(30))
        final class Observations: Sendable {
            let peakOpen = Mutex(0)
            let pids = Mutex(Set<Int32>())
        }
        let seen = Observations()

        let results = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<16 {
                group.addTask {
                    var sum = 0
                    for round in 0..<25 {
                        let value = task * 1000 + round
                        let rows: [PostgresRow]
                        if round % 5 == 0 {
                            rows = try await client.withTransaction { tx in
                                try await tx.query("SELECT \(value) + 1 AS v, pg_backend_pid() AS pid")
                            }
                        } else {
                            rows = try await client.query(
                                .prepared("hammer", "SELECT \(value) + 1 AS v, pg_backend_pid() AS pid"))
                        }
                        #expect(try rows[0].decode("v", as: Int.self) == value + 1)
                        let pid = try rows[0].decode("pid", as: Int32.self)
                        seen.pids.withLock { _ = $0.insert(pid) }
                        let open = client.openConnections
                        seen.peakOpen.withLock { $0 = max($0, open) }
                        sum += 1
                    }
                    return sum
                }
            }
            return try await group.reduce(0, +)
        }

        #expect(results == 16 * 25)
        #expect(seen.peakOpen.withLock { $0 } <= 4)
        #expect(seen.pids.withLock { $0.count } <= 4)
        let open = client.openConnections
        #expect(open >= 1 && open <= 4)
        #expect(try await Self.serverSideConnections(name) == open)

        client.close()
        #expect(client.openConnections == 0)
        // The server notices the closed sockets at once, but give it a moment.
        var remaining = -1
        for _ in 0..<50 {
            remaining = try await Self.serverSideConnections(name)
            if remaining == 0 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(remaining == 0)
    }

    @Test func acquireTimesOutWithATypedErrorWhenThePoolIsExhausted() async throws {
        let client = PostgresClient(
            url: TestEnvironment.databaseURL, applicationName: Self.uniqueApplicationName("timeout"),
            maximumConnections: 1, acquireTimeout: .milliseconds(300))
        defer { client.close() }
        let holding = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await client.withConnection { connection in
                holding.continuation.yield()
                return try await connection.query("SELECT pg_sleep(5)").count
            }
        }
        for await _ in holding.stream { break }

        let start = ContinuousClock.now
        let error = try await #require(throws: ConnectionPoolError.self) {
            try await client.query("SELECT 1")
        }
        let waited = ContinuousClock.now - start
        #expect(error.code == .acquireTimeout)
        #expect(error.description == "postgres pool: timed out waiting for a free connection")
        #expect(waited >= .milliseconds(290) && waited < .milliseconds(4500))

        #expect(try await holder.value == 1)
        // Once the connection is back, the pool serves again.
        #expect(try await client.query("SELECT 2 AS v")[0].decode("v", as: Int.self) == 2)
        #expect(client.openConnections == 1)
    }

    @Test func connectionKilledByTheServerWhileIdleIsReplacedOnNextUse() async throws {
        let name = Self.uniqueApplicationName("killed-idle")
        let client = PostgresClient(url: TestEnvironment.databaseURL, applicationName: name, maximumConnections: 1)
        defer { client.close() }
        let first = try await client.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int32.self)

        try await Self.terminate(first)

        let rows = try await client.query("SELECT pg_backend_pid() AS pid, \("still works") AS v")
        let second = try rows[0].decode("pid", as: Int32.self)
        #expect(second != first)
        #expect(try rows[0].decode("v", as: String.self) == "still works")
        #expect(client.openConnections == 1)
        #expect(try await Self.serverSideConnections(name) == 1)
    }

    @Test func connectionKilledDuringAStatementFailsItAndIsReplacedAfterwards() async throws {
        let name = Self.uniqueApplicationName("killed-busy")
        let client = PostgresClient(url: TestEnvironment.databaseURL, applicationName: name, maximumConnections: 1)
        defer { client.close() }
        let first = try await client.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int32.self)

        let sleeping = Task { try await client.query("SELECT pg_sleep(5)") }
        // Killed only once the statement runs (a fixed sleep could kill the idle backend
        // first on a loaded machine, and the pool would then replace it before the query).
        try await Self.waitUntilRunning(pid: first, query: "SELECT pg_sleep(5)")
        try await Self.terminate(first)
        let error = try await #require(throws: PostgresError.self) { try await sleeping.value }
        #expect(error.code == .connectionClosed)

        let second = try await client.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int32.self)
        #expect(second != first)
        #expect(client.openConnections == 1)
    }

    /// After a failover the endpoint's former primary is a read-only standby, and a
    /// connection still open to it would fail every write for as long as it lives.
    /// A write refused as read-only (SQLSTATE 25006) retires the connection: the next
    /// statement runs on a new one. (A session made read-only stands in for a standby.)
    @Test func aConnectionWhoseWritesAreRefusedAsReadOnlyIsReplaced() async throws {
        let name = Self.uniqueApplicationName("read-only")
        let client = PostgresClient(url: TestEnvironment.databaseURL, applicationName: name, maximumConnections: 1)
        defer { client.close() }
        let first = try await client.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int32.self)
        try await client.execute("SET default_transaction_read_only = on")
        let table = "read_only_probe_\(UInt32.random(in: 0...UInt32.max))"
        let error = try await #require(throws: PostgresError.self) {
            try await client.execute(PostgresQuery(unsafeSQL: "CREATE TABLE \(table) (id int)"))
        }
        #expect(error.isReadOnlyTransaction)

        let second = try await client.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int32.self)
        #expect(second != first, "a new connection after the refusal")
        let writable = try await client.query("SHOW default_transaction_read_only")[0]
        #expect(try writable.decode("default_transaction_read_only", as: String.self) == "off")
        #expect(client.openConnections == 1)
    }

    /// Waits until backend `pid` is running `query`.
    static func waitUntilRunning(pid: Int32, query: String) async throws {
        let admin = try await PostgresConnection.connect(url: TestEnvironment.databaseURL)
        defer { admin.close() }
        for _ in 0..<250 {
            let rows = try await admin.query(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = \(pid) AND state = 'active' AND query = \(query)")
            if try rows[0].decode("n", as: Int.self) == 1 { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("backend \(pid) did not start \(query)")
    }

    /// Terminates a backend from another connection and waits until it is gone.
    static func terminate(_ pid: Int32) async throws {
        let admin = try await PostgresConnection.connect(url: TestEnvironment.databaseURL)
        defer { admin.close() }
        let killed = try await admin.query("SELECT pg_terminate_backend(\(pid)) AS ok")[0].decode("ok", as: Bool.self)
        #expect(killed)
        for _ in 0..<100 {
            let rows = try await admin.query("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = \(pid)")
            if try rows[0].decode("n", as: Int.self) == 0 { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("backend \(pid) did not exit")
    }
}
