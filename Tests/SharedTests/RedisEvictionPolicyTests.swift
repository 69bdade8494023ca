import Shared
import TestSupport
import Testing

@Suite(.serialized) struct RedisEvictionPolicyTests {
    /// On a Redis of its own: the shared one's configuration is not the test's to change.
    @Test func anEvictingPolicyIsFoundAndReportedAsAWarning() async throws {
        try await PrivateRedis.with { server in
            let client = try RedisClient(url: server.url)
            defer { client.close() }
            #expect(await RedisEvictionPolicy.check(client) == .noEviction)

            _ = try await client.send("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
            let lines = CapturedLogLines()
            await RedisEvictionPolicy.report(
                client, logger: Logger(component: "test", sink: .capturing(into: lines)))
            #expect(await RedisEvictionPolicy.check(client) == .evicting("allkeys-lru"))
            #expect(lines.all.count == 1)
            #expect(lines.all.first?.contains(#""level":"warning""#) == true)
            #expect(lines.all.first?.contains(#""maxmemory-policy":"allkeys-lru""#) == true)
        }
    }

    @Test func aRedisThatCannotBeAskedIsUnknownAndNoWarning() async throws {
        let client = try RedisClient(url: "redis://127.0.0.1:\(try UnusedPort.loopback())/0")
        defer { client.close() }
        guard case .unknown = await RedisEvictionPolicy.check(client) else {
            Issue.record("a refused connection should leave the policy unknown")
            return
        }
        let lines = CapturedLogLines()
        await RedisEvictionPolicy.report(client, logger: Logger(component: "test", sink: .capturing(into: lines)))
        #expect(lines.all.count == 1)
        #expect(lines.all.first?.contains(#""level":"info""#) == true)
    }
}
