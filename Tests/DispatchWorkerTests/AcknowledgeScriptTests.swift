import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// `QueueScripts.acknowledge` applies an outcome once per entry, however often the
/// write is repeated (a retry after its answer was lost).
@Suite struct AcknowledgeScriptTests {
    /// A stream with the `workers` group and the keys a test's outcomes write, all
    /// under a hash tag of the test's own (deleted afterwards).
    struct Keys {
        let stream, group, quota, reply, retries: String

        init() {
            let tag = "{ack\(UInt64.random(in: 0...UInt64.max))}"
            (stream, group) = ("pushgate-test:queue:\(tag)", "workers")
            (quota, reply) = ("pushgate-test:\(tag):quota", "pushgate-test:\(tag):reply")
            retries = "pushgate-test:\(tag):retries"
        }

        static func with(_ body: (RedisClient, Keys) async throws -> Void) async throws {
            let redis = try RedisClient(url: TestEnvironment.redisURL)
            defer { redis.close() }
            let keys = Keys()
            _ = try await redis.send("XGROUP", "CREATE", keys.stream, keys.group, "$", "MKSTREAM")
            do {
                try await body(redis, keys)
            } catch {
                await keys.delete(redis)
                throw error
            }
            await keys.delete(redis)
        }

        /// One entry of format `version`, read by consumer `w1` (so pending), with a
        /// quota of 5 reserved; its id.
        func readEntry(_ redis: RedisClient, version: String) async throws -> String {
            let id = try #require(try await redis.send("XADD", stream, "*", "v", version).string)
            _ = try await redis.send("XREADGROUP", "GROUP", group, "w1", "COUNT", 10, "STREAMS", stream, ">")
            _ = try await redis.send("SET", quota, 5)
            return id
        }

        /// The acknowledge script's answer to `arguments`, run twice (as a write retried
        /// after a lost answer).
        func acknowledgeTwice(_ redis: RedisClient, _ arguments: [any RedisValueConvertible]) async throws
            -> (first: Int64?, second: Int64?)
        {
            let first = try await redis.run(QueueScripts.acknowledge, keys: [stream, retries], arguments: arguments)
            let second = try await redis.run(QueueScripts.acknowledge, keys: [stream, retries], arguments: arguments)
            return (first.int, second.int)
        }

        func delete(_ redis: RedisClient) async {
            _ = try? await redis.send(RedisCommand("DEL", arguments: [stream, quota, reply, retries]))
        }
    }

    @Test func aRepeatedAcknowledgementReleasesTheQuotaAndAnswersOnce() async throws {
        try await Keys.with { redis, keys in
            let id = try await keys.readEntry(redis, version: "1")

            // No plain entries; one of one message with a quota release and a reply.
            let (first, second) = try await keys.acknowledgeTwice(
                redis, [keys.group, 60, 0, id, 1, keys.quota, keys.reply, #"{"status":"failed"}"#, 0, 0])

            #expect(first == 1)
            #expect(second == 0)
            #expect(try await redis.send("GET", keys.quota).string == "4")
            #expect(try await redis.send("LLEN", keys.reply).int == 1)
            #expect(try await redis.send("XLEN", keys.stream).int == 0)
            #expect(try await redis.send("TTL", keys.reply).int ?? 0 > 0)
        }
    }

    @Test func plainEntriesAreAcknowledgedTogetherAndCountedOnlyWhileStillPending() async throws {
        try await Keys.with { redis, keys in
            var ids: [String] = []
            for _ in 0..<1001 {
                ids.append(try #require(try await redis.send("XADD", keys.stream, "*", "v", "2").string))
            }
            _ = try await redis.send(
                "XREADGROUP", "GROUP", keys.group, "w1", "COUNT", 2000, "STREAMS", keys.stream, ">")
            _ = try await redis.send("SET", keys.quota, 5)
            let scriptKeys = [keys.stream, keys.retries]
            let early = try await redis.run(
                QueueScripts.acknowledge, keys: scriptKeys, arguments: [keys.group, 60, 1, ids[0]])
            // More than one XACK's worth of plain entries, one already acknowledged, and one releasing its quota.
            let arguments: [any RedisValueConvertible] =
                [keys.group, 60, 1000] + ids[0..<1000].map { $0 as any RedisValueConvertible }
                + [ids[1000], 1, keys.quota, "", "", 0, 0]
            let all = try await redis.run(QueueScripts.acknowledge, keys: scriptKeys, arguments: arguments)

            #expect(early.int == 1)
            #expect(all.int == 1000)
            #expect(try await redis.send("XLEN", keys.stream).int == 0)
            #expect(try await redis.send("XPENDING", keys.stream, keys.group).array?.first?.int == 0)
            #expect(try await redis.send("GET", keys.quota).string == "4")
        }
    }

    @Test func anEntrysMessagesAreReleasedAnsweredAndRetriedOnceWithItsAcknowledgement() async throws {
        try await Keys.with { redis, keys in
            let id = try await keys.readEntry(redis, version: "4")

            // One entry of four messages: sent; failed with a reply; failed (quota only); retried in 60 s.
            let arguments: [any RedisValueConvertible] = [
                keys.group, 60, 0, id, 4,
                "", "", "", 0, 0,
                keys.quota, keys.reply, #"{"status":"failed"}"#, 0, 0,
                keys.quota, "", "", 0, 0,
                "", "", "", 60_000, 4, "v", "2", "n", "1",
            ]
            let (first, second) = try await keys.acknowledgeTwice(redis, arguments)

            #expect(first == 1)
            #expect(second == 0)
            #expect(try await redis.send("GET", keys.quota).string == "3")
            #expect(try await redis.send("LLEN", keys.reply).int == 1)
            #expect(try await redis.send("XLEN", keys.stream).int == 0)
            let scheduled = try await redis.send("ZRANGE", keys.retries, 0, -1, "WITHSCORES").array ?? []
            #expect(scheduled.count == 2)
            let now = Date().timeIntervalSince1970 * 1000
            let due = Double(scheduled.last?.string ?? "") ?? 0
            #expect(due > now + 50_000 && due < now + 70_000)
            let member = try #require(scheduled.first?.bytes)
            let unpacked = try await redis.send("EVAL", "return cmsgpack.unpack(ARGV[1])", 0, member)
            #expect(unpacked.array?.compactMap(\.string) == ["v", "2", "n", "1"])
        }
    }
}

/// `QueueScripts.claimOwn` pages through the entries pending under one consumer name
/// only, in order, each claimed again (its delivery count one higher), skipping
/// entries deleted meanwhile, and says when it is done.
@Suite struct ClaimOwnScriptTests {
    @Test func pagesThroughItsOwnPendingEntriesOnly() async throws {
        try await AcknowledgeScriptTests.Keys.with { redis, keys in
            var ids: [String] = []
            for index in 0..<5 {
                ids.append(try #require(try await redis.send("XADD", keys.stream, "*", "n", index).string))
            }
            _ = try await redis.send("XREADGROUP", "GROUP", keys.group, "w1", "COUNT", 4, "STREAMS", keys.stream, ">")
            _ = try await redis.send("XREADGROUP", "GROUP", keys.group, "w2", "COUNT", 1, "STREAMS", keys.stream, ">")
            _ = try await redis.send("XDEL", keys.stream, ids[1])  // pending under w1, gone from the stream

            var cursor = "-"
            var claimed: [(id: String, deliveries: Int)] = []
            for _ in 0..<10 {
                let reply = try await redis.run(
                    QueueScripts.claimOwn, keys: [keys.stream], arguments: [keys.group, "w1", cursor, 2])
                let (next, entries) = QueueConsumer.claimed(reply)
                claimed += entries.map { ($0.id, $0.deliveryCount) }
                if next.isEmpty { break }
                cursor = next
            }
            #expect(cursor == ids[3], "pages of two: then one that finds nothing")
            #expect(claimed.map(\.id) == [ids[0], ids[2], ids[3]])
            #expect(claimed.map(\.deliveries) == [2, 2, 2])
            // w2's entry stays w2's; the deleted one left w1's pending list.
            let pending = try await redis.send("XPENDING", keys.stream, keys.group, "-", "+", 10).array ?? []
            let owners = pending.compactMap { $0.array.flatMap { $0.count > 1 ? $0[1].string : nil } }
            #expect(owners == ["w1", "w1", "w1", "w2"])
        }
    }
}
