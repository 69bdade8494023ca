import Foundation
import TestSupport
import Testing

@testable import Shared

/// Restarts the test Redis (`scripts/services restart redis`, with this process's
/// environment, so `PUSHGATE_REDIS_PORT` picks the same instance): run on its own
/// with `swift test --filter Disruptive`, never alongside the other suites.
@Suite(.serialized) struct DisruptiveRedisRestartTests {
    @Test func poolWorksAgainAfterRedisRestartsAndInFlightCommandFailsWithConnectionError() async throws {
        let client = try RedisTesting.client(maximumConnections: 2, commandTimeout: .seconds(20))
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("restart")
        let script = RedisScript(source: "return redis.call('INCR', KEYS[1])")

        // Two idle connections in the pool, both of which have loaded the script.
        try await client.withConnection { first in
            try await client.withConnection { second in
                _ = try await first.pipeline([.script(script, keys: [prefix + "a"])])
                _ = try await second.pipeline([.script(script, keys: [prefix + "b"])])
            }
        }
        #expect(client.openConnections == 2)

        // One command in flight while the server goes away: it fails, typed, and is not retried.
        let inFlight = Task { try await client.send("BLPOP", prefix + "never", 15) }
        try await Task.sleep(for: .milliseconds(300))
        try await Self.restartRedis()

        let error = try await #require(throws: RedisError.self) { try await inFlight.value }
        #expect(error.code == .connection)
        #expect(error.command == "BLPOP")

        // The next leases work: stale idle connections are noticed and replaced, and
        // the script is loaded again on the new connections.
        #expect(try await client.send("PING") == .status("PONG"))
        #expect(try await client.run(script, keys: [prefix + "a"]).int != nil)
        let replies = try await client.pipeline((0..<10).map { _ in .script(script, keys: [prefix + "c"]) })
        #expect(replies == (1...10).map { .integer(Int64($0)) })
        #expect(client.openConnections <= 2)
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    static func restartRedis() async throws {
        let status = try await SpawnedProcess.run(
            TestEnvironment.repositoryRoot.appendingPathComponent("scripts/services").path, ["restart", "redis"])
        #expect(status == 0)
    }
}
