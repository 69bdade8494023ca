import Shared
import TestSupport
import Testing

@Suite(.serialized) struct RedisEvictionPolicyTests {
    /// The test Redis has no `maxmemory`, so no key is evicted while the policy says it
    /// may be; other suites running meanwhile are not disturbed.
    @Test func anEvictingPolicyIsFoundAndReportedAsAWarning() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        #expect(await RedisEvictionPolicy.check(client) == .noEviction)

        _ = try await client.send("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        let lines = CapturedLogLines()
        await RedisEvictionPolicy.report(
            client, logger: Logger(component: "test", sink: .capturing(into: lines)))
        let finding = await RedisEvictionPolicy.check(client)
        _ = try await client.send("CONFIG", "SET", "maxmemory-policy", "noeviction")

        #expect(finding == .evicting("allkeys-lru"))
        #expect(lines.all.count == 1)
        #expect(lines.all.first?.contains(#""level":"warning""#) == true)
        #expect(lines.all.first?.contains(#""maxmemory-policy":"allkeys-lru""#) == true)
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
