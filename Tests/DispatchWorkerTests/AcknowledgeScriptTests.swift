import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// `QueueScripts.acknowledge` applies an outcome once per entry, however often the
/// write is repeated (a retry after its answer was lost).
@Suite struct AcknowledgeScriptTests {
    @Test func aRepeatedAcknowledgementReleasesTheQuotaAndAnswersOnce() async throws {
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer { redis.close() }
        let tag = "{ack\(UInt64.random(in: 0...UInt64.max))}"
        let (stream, group) = ("pushgate-test:queue:\(tag)", "workers")
        let (quota, reply) = ("pushgate-test:\(tag):quota", "pushgate-test:\(tag):reply")
        defer { Task { _ = try? await redis.send(RedisCommand("DEL", arguments: [stream, quota, reply])) } }
        _ = try await redis.send("XGROUP", "CREATE", stream, group, "$", "MKSTREAM")
        let id = try #require(try await redis.send("XADD", stream, "*", "v", "1").string)
        _ = try await redis.send("XREADGROUP", "GROUP", group, "w1", "COUNT", 10, "STREAMS", stream, ">")
        _ = try await redis.send("SET", quota, 5)

        let arguments: [any RedisValueConvertible] = [group, 60, id, quota, reply, #"{"status":"failed"}"#]
        let first = try await redis.run(QueueScripts.acknowledge, keys: [stream], arguments: arguments)
        let second = try await redis.run(QueueScripts.acknowledge, keys: [stream], arguments: arguments)

        #expect(first.int == 1)
        #expect(second.int == 0)
        #expect(try await redis.send("GET", quota).string == "4")
        #expect(try await redis.send("LLEN", reply).int == 1)
        #expect(try await redis.send("XLEN", stream).int == 0)
        #expect(try await redis.send("TTL", reply).int ?? 0 > 0)
    }
}
