import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// The hot path's cache fills read Postgres over connections of their own
/// (`DATABASE_FILL_CONNECTIONS`): fills that hang, as under a flood of pushes to
/// unknown push URLs, must not take the connections /readyz, registrations and the
/// admin API need.
@Suite struct CacheFillIsolationTests {
    @Test func aFillThatWaitsOnPostgresLeavesTheOtherConnectionsFree() async throws {
        // The ingress reads `subscriptions` from a schema of this test's own, whose
        // table the test can lock without holding up the suites that share Postgres.
        let schema = "fill_isolation_\(UInt32.random(in: 0...UInt32.max))"
        let setup = PostgresClient(configuration: .init(url: TestEnvironment.databaseURL, maximumConnections: 2))
        defer { setup.close() }
        try await setup.execute(PostgresQuery(stringLiteral: "CREATE SCHEMA \(schema)"))
        try await setup.execute(
            PostgresQuery(stringLiteral: "CREATE TABLE \(schema).subscriptions (LIKE public.subscriptions)"))
        let url = TestEnvironment.databaseURL + "?options=-csearch_path%3D\(schema),public"
        do {
            try await IngressTestApp.with(
                ["DATABASE_URL": url, "DATABASE_CONNECTIONS": "1", "DATABASE_FILL_CONNECTIONS": "1"]
            ) { app in
                let release = AsyncStream<Void>.makeStream()
                let locked = AsyncStream<Int32>.makeStream()
                let locker = Task {
                    try await setup.withTransaction { connection in
                        try await connection.execute(
                            PostgresQuery(stringLiteral: "LOCK TABLE \(schema).subscriptions IN ACCESS EXCLUSIVE MODE"))
                        let row = try await connection.query("SELECT pg_backend_pid() AS pid").first
                        locked.continuation.yield(try #require(row).decode("pid", as: Int32.self))
                        for await _ in release.stream { break }
                    }
                }
                var lockerPID: Int32 = 0
                for await pid in locked.stream {
                    lockerPID = pid
                    break
                }
                let unknown = Base64URL.encode(SecureRandom.bytes(16))
                let push = Task { try await app.push(unknown) }
                // The push's fill waits on the lock…
                let waiting = try await Poll.until(timeout: .seconds(10), interval: .milliseconds(20)) {
                    let rows = try await setup.query(
                        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE \(lockerPID) = ANY(pg_blocking_pids(pid))"
                    )
                    return try rows.first?.decode("n", as: Int32.self) == 1
                }
                #expect(waiting)
                // …and the ingress's other connection still answers.
                #expect(try await app.request("GET", "/readyz").status == 200)
                release.continuation.yield()
                try await locker.value
                // Once the lock is gone the fill finds no such subscription.
                #expect(try await push.value.status == 404)
            }
        } catch {
            _ = try? await setup.execute(PostgresQuery(stringLiteral: "DROP SCHEMA \(schema) CASCADE"))
            throw error
        }
        try await setup.execute(PostgresQuery(stringLiteral: "DROP SCHEMA \(schema) CASCADE"))
    }

    /// A device request's fill of the entry it changed (`DeviceRoutes.cacheAgain`)
    /// does not hold its answer while the fills' connections are all taken: the row
    /// is committed, and a 503 past `DeviceRoutes.storageWait` would lose a
    /// registration's secret.
    @Test func registrationAndActivationAreAnsweredWhileTheFillConnectionsAreTaken() async throws {
        try await IngressTestApp.with(["DATABASE_FILL_CONNECTIONS": "1"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let holding = Task { try await app.app.fillPostgres.query("SELECT pg_sleep(6)") }
            let held = try await Poll.until(timeout: .seconds(10), interval: .milliseconds(20)) {
                let rows = try await app.postgres.query(
                    """
                    SELECT count(*)::int AS n FROM pg_stat_activity
                    WHERE application_name = 'pushgate-ingress-fill' AND query = 'SELECT pg_sleep(6)'
                        AND state = 'active'
                    """)
                return try rows.first?.decode("n", as: Int32.self) == 1
            }
            #expect(held)
            let started = ContinuousClock.now
            _ = try await app.subscribe(topic: fixture.topic)  // 201, then 204
            let took = ContinuousClock.now - started
            #expect(took < .seconds(3), "answered after \(took)")
            _ = try await holding.value
        }
    }
}
