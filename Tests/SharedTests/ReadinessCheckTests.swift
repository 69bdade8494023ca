import Foundation
import TestSupport
import Testing

@testable import Shared

/// `/readyz` against a Postgres that takes connections and never answers (a host gone
/// silent, packets dropped: the hardest outage for a probe, which gets no refusal).
@Suite struct ReadinessCheckTests {
    /// A listener nobody accepts from: connections complete in its backlog, and the
    /// server's greeting never comes.
    private static func withSilentPostgres(_ body: (PostgresClient, RedisClient) async throws -> Void) async throws {
        let (fd, port) = try UnusedPort.boundSocket()
        listen(fd, 16)
        let postgres = PostgresClient(url: "postgresql://pushgate@127.0.0.1:\(port)/pushgate", maximumConnections: 2)
        defer {
            postgres.close()
            close(fd)
        }
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer { redis.close() }
        try await body(postgres, redis)
    }

    @Test func excludingPostgresAnswersFromRedisWithoutWaitingLongForPostgres() async throws {
        try await Self.withSilentPostgres { postgres, redis in
            let start = ContinuousClock.now
            let response = await ReadinessCheck(redis: redis, postgres: postgres).response(requiringPostgres: false)
            // Its bound is half a second; loose for a contended machine, but far from the
            // silent server's connect timeout (10 s) that used to hold the probe.
            #expect(ContinuousClock.now - start < .seconds(5))
            #expect(response.status == 200)
            #expect(String(decoding: response.body, as: UTF8.self) == #"{"redis":"ok","postgres":"down"}"#)
        }
    }

    @Test func aSilentPostgresIsReportedDownWithinTheProbesBound() async throws {
        try await Self.withSilentPostgres { postgres, redis in
            let start = ContinuousClock.now
            let response = await ReadinessCheck(redis: redis, postgres: postgres).response()
            // Two seconds (loose for a contended machine), not the connect timeout (10 s)
            // of the query still waiting.
            #expect(ContinuousClock.now - start >= .seconds(2))
            #expect(ContinuousClock.now - start < .seconds(7))
            #expect(response.status == 503)
            #expect(String(decoding: response.body, as: UTF8.self) == #"{"redis":"ok","postgres":"down"}"#)
        }
    }

    /// Callers that ask while a probe is under way share it, and an answer serves for
    /// `reuseFor`: a flood of `/readyz` on the public port costs one probe a second,
    /// not one per request. Redis is cut off (through a relay) after the first answer.
    /// (Reused for 3 s here: on a loaded machine the 50 callers may take over a second.)
    @Test func answersAreSharedAndReusedForAWhile() async throws {
        let (relay, relayedURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
        defer { relay.close() }
        let redis = try RedisClient(
            url: relayedURL, options: .init(connection: .init(connectTimeout: .seconds(1), commandTimeout: .seconds(1)))
        )
        defer { redis.close() }
        let postgres = PostgresClient(url: TestEnvironment.databaseURL, maximumConnections: 2)
        defer { postgres.close() }
        let readiness = ReadinessCheck(redis: redis, postgres: postgres, reuseFor: .seconds(3))
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<50 { group.addTask { await readiness.response(requiringPostgres: false).status } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(statuses == Array(repeating: 200, count: 50))
        relay.cut()
        #expect(await readiness.response(requiringPostgres: false).status == 200)  // reused
        try await Task.sleep(for: .milliseconds(3100))
        #expect(await readiness.response(requiringPostgres: false).status == 503)  // asked again
    }

    /// The start-up check (`schemaIsBehind`) says why Postgres does not answer, once,
    /// as a warning: with `/readyz` probed for Redis alone (the manifests), nothing else
    /// would tell an operator before registrations fail. The URL is never quoted.
    @Test func anUnreachablePostgresAtStartIsLoggedWithWhy() async throws {
        let lines = try await Self.startUpCheckLog(databaseURL: "postgresql://pushgate:S3cretPW@127.0.0.1:1/pushgate")
        let warnings = lines.filter { $0.contains("Postgres does not answer") }
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains(#""error":"#) == true)
        #expect(!lines.joined().contains("S3cretPW"))
    }

    /// A Postgres that answers and refuses the connection (a role that does not
    /// exist): an error that says so, not a warning that it does not answer.
    @Test func aPostgresThatRefusesTheConnectionAtStartIsLoggedAsAnError() async throws {
        let url = TestEnvironment.databaseURL.replacingOccurrences(of: "://pushgate@", with: "://no_such_role_x@")
        try #require(url != TestEnvironment.databaseURL)
        let lines = try await Self.startUpCheckLog(databaseURL: url)
        let errors = lines.filter { $0.contains("Postgres refuses this service's connection") }
        #expect(errors.count == 1)
        #expect(errors.first?.contains(#""level":"error""#) == true)
        #expect(errors.first?.contains("no_such_role_x") == true)
        #expect(!lines.joined().contains("Postgres does not answer"))
    }

    /// The log lines of the start-up check against a Postgres at `databaseURL` that
    /// cannot be used (it answers no schema: `schemaIsBehind` is false).
    private static func startUpCheckLog(databaseURL: String) async throws -> [String] {
        let postgres = PostgresClient(url: databaseURL, maximumConnections: 1)
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer {
            redis.close()
            postgres.close()
        }
        let (logger, lines) = TestEnvironment.capturingLogger()
        #expect(await !ReadinessCheck(redis: redis, postgres: postgres, logger: logger).schemaIsBehind())
        return lines.all
    }

    /// A database behind this build's schema (a rollout before its `migrate`): not
    /// ready, also with Postgres excluded, logged once with both versions; once
    /// migrated, ready again.
    @Test func aDatabaseWithAnOlderSchemaIsNotReadyUntilMigrated() async throws {
        let database = try await ScratchDatabase.create("readiness")
        let postgres = PostgresClient(url: database.url, maximumConnections: 2)
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer {
            redis.close()
            postgres.close()
        }
        let (logger, lines) = TestEnvironment.capturingLogger()
        let readiness = ReadinessCheck(redis: redis, postgres: postgres, reuseFor: .zero, logger: logger)
        let behind = #"{"redis":"ok","postgres":"schema_behind"}"#

        // Never migrated: no schema_migrations table.
        for requiringPostgres in [true, false] {
            let response = await readiness.response(requiringPostgres: requiringPostgres)
            #expect(response.status == 503)
            #expect(String(decoding: response.body, as: UTF8.self) == behind)
        }
        let errors = lines.all.filter { $0.contains("database schema is older than this build needs") }
        #expect(errors.count == 1)
        #expect(errors.first?.contains(#""schema.database":"0""#) == true)
        #expect(errors.first?.contains(#""schema.required":"\#(Migrations.newestVersion)""#) == true)

        try await Migrator(logger: logger).migrate(postgres)
        let ready = await readiness.response()
        #expect(ready.status == 200)
        #expect(String(decoding: ready.body, as: UTF8.self) == #"{"redis":"ok","postgres":"ok"}"#)
        #expect(lines.all.contains { $0.contains("database schema is current") })

        // A build that needs a newer version than the database's.
        let newer = ReadinessCheck(
            redis: redis, postgres: postgres, reuseFor: .zero, requiredSchemaVersion: Migrations.newestVersion + 1)
        #expect(String(decoding: await newer.response().body, as: UTF8.self) == behind)
        try await database.drop()
    }
}
