import Foundation
import TestSupport
import Testing

@testable import Shared

/// `/readyz` against a Postgres that takes connections and never answers (a host gone
/// silent, packets dropped: the hardest outage for a probe, which gets no refusal).
@Suite struct ReadinessCheckTests {
    /// A listener nobody accepts from: connections complete in its backlog, and the
    /// server's greeting never comes.
    private static func silentPostgres() throws -> (fd: Int32, client: PostgresClient) {
        let (fd, port) = try UnusedPort.boundSocket()
        listen(fd, 16)
        let client = PostgresClient(url: "postgresql://pushgate@127.0.0.1:\(port)/pushgate", maximumConnections: 2)
        return (fd, client)
    }

    @Test func excludingPostgresAnswersFromRedisWithoutWaitingLongForPostgres() async throws {
        let (fd, postgres) = try Self.silentPostgres()
        defer {
            postgres.close()
            close(fd)
        }
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer { redis.close() }
        let start = ContinuousClock.now
        let response = await ReadinessCheck(redis: redis, postgres: postgres).response(requiringPostgres: false)
        // Its bound is half a second; loose for a contended machine, but far from the
        // silent server's connect timeout (10 s) that used to hold the probe.
        #expect(ContinuousClock.now - start < .seconds(5))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == #"{"redis":"ok","postgres":"down"}"#)
    }

    @Test func aSilentPostgresIsReportedDownWithinTheProbesBound() async throws {
        let (fd, postgres) = try Self.silentPostgres()
        defer {
            postgres.close()
            close(fd)
        }
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer { redis.close() }
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
