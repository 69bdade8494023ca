import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// `QueueScripts.acknowledge` applies an outcome, daily count included, once per
/// entry, however often the write is repeated (a retry after its answer was lost).
@Suite struct AcknowledgeScriptTests {
    /// A stream with the `workers` group and the keys a test's outcomes write, all
    /// under a hash tag of the test's own (deleted afterwards).
    struct Keys {
        let stream, group, quota, reply, retries, counts: String

        init() {
            let tag = "{ack\(UInt64.random(in: 0...UInt64.max))}"
            (stream, group) = ("pushgate-test:queue:\(tag)", "workers")
            (quota, reply) = ("pushgate-test:\(tag):quota", "pushgate-test:\(tag):reply")
            (retries, counts) = ("pushgate-test:\(tag):retries", "pushgate-test:\(tag):counts")
        }

        var scriptKeys: [String] { [stream, retries, counts] }

        /// Counter fields of app `app`'s day, as the worker makes them.
        static func field(_ kind: DailyCounts.Kind, app: String = "app") -> [UInt8] {
            CounterField.make(account: "account", app: app, day: "2026-12-01", kind: kind)
        }

        /// What the counts hash holds for `field`.
        func count(_ redis: RedisClient, _ field: [UInt8]) async throws -> Int? {
            try await redis.send("HGET", counts, field).string.flatMap { Int($0) }
        }

        /// A plain entry's counts: (counter number, messages) records.
        static func records(_ pairs: (UInt32, UInt32)...) -> [UInt8] {
            pairs.flatMap { pair in
                withUnsafeBytes(of: (pair.0.bigEndian, pair.1.bigEndian)) { Array($0) }
            }
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
            let first = try await redis.run(QueueScripts.acknowledge, keys: scriptKeys, arguments: arguments)
            let second = try await redis.run(QueueScripts.acknowledge, keys: scriptKeys, arguments: arguments)
            return (first.int, second.int)
        }

        func delete(_ redis: RedisClient) async {
            _ = try? await redis.send(RedisCommand("DEL", arguments: [stream, quota, reply, retries, counts]))
        }
    }

    @Test func aRepeatedAcknowledgementReleasesTheQuotaAnswersAndCountsOnce() async throws {
        try await Keys.with { redis, keys in
            let id = try await keys.readEntry(redis, version: "1")

            // One counter; no plain entries; one of one message with a quota release, a reply and a count.
            let (first, second) = try await keys.acknowledgeTwice(
                redis,
                [
                    keys.group, 60, 1, Keys.field(.failed), 0, id, 1, keys.quota, keys.reply, #"{"status":"failed"}"#,
                    0, 1, 0,
                ])

            #expect(first == 1)
            #expect(second == 0)
            #expect(try await redis.send("GET", keys.quota).string == "4")
            #expect(try await redis.send("LLEN", keys.reply).int == 1)
            #expect(try await redis.send("XLEN", keys.stream).int == 0)
            #expect(try await redis.send("TTL", keys.reply).int ?? 0 > 0)
            #expect(try await keys.count(redis, Keys.field(.failed)) == 1)
        }
    }

    /// Plain entries are acknowledged 500 at a time; when one `XACK` finds fewer of
    /// them pending than it was given, only those it acknowledged are counted.
    @Test func plainEntriesAreAcknowledgedTogetherAndCountedOnlyWhileStillPending() async throws {
        try await Keys.with { redis, keys in
            var ids: [String] = []
            for _ in 0..<1001 {
                ids.append(try #require(try await redis.send("XADD", keys.stream, "*", "v", "2").string))
            }
            _ = try await redis.send(
                "XREADGROUP", "GROUP", keys.group, "w1", "COUNT", 2000, "STREAMS", keys.stream, ">")
            _ = try await redis.send("SET", keys.quota, 5)
            let (sentA, sentB, failedA) = (Keys.field(.sent), Keys.field(.sent, app: "b"), Keys.field(.failed))
            // Acknowledged early: entry 0 (one message of app a) and entry 600 (two of a, one of b).
            let early = try await redis.run(
                QueueScripts.acknowledge, keys: keys.scriptKeys,
                arguments: [
                    keys.group, 60, 2, sentA, sentB, 2, ids[0], ids[600], Keys.records((1, 1)),
                    Keys.records((1, 2), (2, 1)),
                ])
            // More than one XACK's worth of plain entries, two already acknowledged, and
            // one releasing its quota: each plain entry two messages of app a and one of
            // b, except entry 1: one of b only.
            let records = (0..<1000).map { $0 == 1 ? Keys.records((2, 1)) : Keys.records((1, 2), (2, 1)) }
            let arguments: [any RedisValueConvertible] =
                [keys.group, 60, 3, sentA, sentB, failedA, 1000] + ids[0..<1000].map { $0 as any RedisValueConvertible }
                + records.map { $0 as any RedisValueConvertible } + [ids[1000], 1, keys.quota, "", "", 0, 3, 0]
            let all = try await redis.run(QueueScripts.acknowledge, keys: keys.scriptKeys, arguments: arguments)

            #expect(early.int == 2)
            #expect(all.int == 999)
            #expect(try await redis.send("XLEN", keys.stream).int == 0)
            #expect(try await redis.send("XPENDING", keys.stream, keys.group).array?.first?.int == 0)
            #expect(try await redis.send("GET", keys.quota).string == "4")
            // Early: 1 + 2 of a, 1 of b. Then 997 entries of 2 + 1, and entry 1's one of b.
            #expect(try await keys.count(redis, sentA) == 3 + 997 * 2)
            #expect(try await keys.count(redis, sentB) == 1 + 997 + 1)
            #expect(try await keys.count(redis, failedA) == 1)
        }
    }

    @Test func anEntrysMessagesAreReleasedAnsweredAndRetriedOnceWithItsAcknowledgement() async throws {
        try await Keys.with { redis, keys in
            let id = try await keys.readEntry(redis, version: "4")

            // One entry of four messages: sent; failed with a reply; failed (quota only); retried in 60 s.
            let arguments: [any RedisValueConvertible] = [
                keys.group, 60, 2, Keys.field(.sent), Keys.field(.failed), 0, id, 4,
                "", "", "", 0, 1, 0,
                keys.quota, keys.reply, #"{"status":"failed"}"#, 0, 2, 0,
                keys.quota, "", "", 0, 2, 0,
                "", "", "", 60_000, 0, 4, "v", "2", "n", "1",
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
            #expect(try await keys.count(redis, Keys.field(.sent)) == 1)
            #expect(try await keys.count(redis, Keys.field(.failed)) == 2)
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
