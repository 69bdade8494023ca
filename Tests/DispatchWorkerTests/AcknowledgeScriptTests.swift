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
        let retries = "pushgate-test:\(tag):retries"
        defer { Task { _ = try? await redis.send(RedisCommand("DEL", arguments: [stream, quota, reply, retries])) } }
        _ = try await redis.send("XGROUP", "CREATE", stream, group, "$", "MKSTREAM")
        let id = try #require(try await redis.send("XADD", stream, "*", "v", "1").string)
        _ = try await redis.send("XREADGROUP", "GROUP", group, "w1", "COUNT", 10, "STREAMS", stream, ">")
        _ = try await redis.send("SET", quota, 5)

        // No plain entries; one of one message with a quota release and a reply.
        let arguments: [any RedisValueConvertible] = [
            group, 60, 0, id, 1, quota, reply, #"{"status":"failed"}"#, 0, 0,
        ]
        let first = try await redis.run(QueueScripts.acknowledge, keys: [stream, retries], arguments: arguments)
        let second = try await redis.run(QueueScripts.acknowledge, keys: [stream, retries], arguments: arguments)

        #expect(first.int == 1)
        #expect(second.int == 0)
        #expect(try await redis.send("GET", quota).string == "4")
        #expect(try await redis.send("LLEN", reply).int == 1)
        #expect(try await redis.send("XLEN", stream).int == 0)
        #expect(try await redis.send("TTL", reply).int ?? 0 > 0)
    }

    @Test func plainEntriesAreAcknowledgedTogetherAndCountedOnlyWhileStillPending() async throws {
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer { redis.close() }
        let tag = "{ack\(UInt64.random(in: 0...UInt64.max))}"
        let (stream, group) = ("pushgate-test:queue:\(tag)", "workers")
        let (quota, retries) = ("pushgate-test:\(tag):quota", "pushgate-test:\(tag):retries")
        defer { Task { _ = try? await redis.send(RedisCommand("DEL", arguments: [stream, quota])) } }
        _ = try await redis.send("XGROUP", "CREATE", stream, group, "$", "MKSTREAM")
        var ids: [String] = []
        for _ in 0..<1001 { ids.append(try #require(try await redis.send("XADD", stream, "*", "v", "2").string)) }
        _ = try await redis.send("XREADGROUP", "GROUP", group, "w1", "COUNT", 2000, "STREAMS", stream, ">")
        _ = try await redis.send("SET", quota, 5)
        let early = try await redis.run(
            QueueScripts.acknowledge, keys: [stream, retries], arguments: [group, 60, 1, ids[0]])
        // More than one XACK's worth of plain entries, one already acknowledged, and one releasing its quota.
        let arguments: [any RedisValueConvertible] =
            [group, 60, 1000] + ids[0..<1000].map { $0 as any RedisValueConvertible }
            + [ids[1000], 1, quota, "", "", 0, 0]
        let all = try await redis.run(QueueScripts.acknowledge, keys: [stream, retries], arguments: arguments)

        #expect(early.int == 1)
        #expect(all.int == 1000)
        #expect(try await redis.send("XLEN", stream).int == 0)
        #expect(try await redis.send("XPENDING", stream, group).array?.first?.int == 0)
        #expect(try await redis.send("GET", quota).string == "4")
    }

    @Test func anEntrysMessagesAreReleasedAnsweredAndRetriedOnceWithItsAcknowledgement() async throws {
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer { redis.close() }
        let tag = "{ack\(UInt64.random(in: 0...UInt64.max))}"
        let (stream, group) = ("pushgate-test:queue:\(tag)", "workers")
        let (quota, reply) = ("pushgate-test:\(tag):quota", "pushgate-test:\(tag):reply")
        let retries = "pushgate-test:\(tag):retries"
        defer { Task { _ = try? await redis.send(RedisCommand("DEL", arguments: [stream, quota, reply, retries])) } }
        _ = try await redis.send("XGROUP", "CREATE", stream, group, "$", "MKSTREAM")
        let id = try #require(try await redis.send("XADD", stream, "*", "v", "4").string)
        _ = try await redis.send("XREADGROUP", "GROUP", group, "w1", "COUNT", 10, "STREAMS", stream, ">")
        _ = try await redis.send("SET", quota, 5)

        // One entry of four messages: sent; failed with a reply; failed (quota only); retried in 60 s.
        let arguments: [any RedisValueConvertible] = [
            group, 60, 0, id, 4,
            "", "", "", 0, 0,
            quota, reply, #"{"status":"failed"}"#, 0, 0,
            quota, "", "", 0, 0,
            "", "", "", 60_000, 4, "v", "2", "n", "1",
        ]
        let first = try await redis.run(QueueScripts.acknowledge, keys: [stream, retries], arguments: arguments)
        let second = try await redis.run(QueueScripts.acknowledge, keys: [stream, retries], arguments: arguments)

        #expect(first.int == 1)
        #expect(second.int == 0)
        #expect(try await redis.send("GET", quota).string == "3")
        #expect(try await redis.send("LLEN", reply).int == 1)
        #expect(try await redis.send("XLEN", stream).int == 0)
        let scheduled = try await redis.send("ZRANGE", retries, 0, -1, "WITHSCORES").array ?? []
        #expect(scheduled.count == 2)
        let now = Date().timeIntervalSince1970 * 1000
        let due = Double(scheduled.last?.string ?? "") ?? 0
        #expect(due > now + 50_000 && due < now + 70_000)
        let member = try #require(scheduled.first?.bytes)
        let unpacked = try await redis.send("EVAL", "return cmsgpack.unpack(ARGV[1])", 0, member)
        #expect(unpacked.array?.compactMap(\.string) == ["v", "2", "n", "1"])
    }
}
