import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Shared

@Suite struct RedisMultiplexerBatchTests {
    /// Per item (one argument): the item's argument, the batch's size and the counter's
    /// value after this item's INCR, or an error for the argument `fail`.
    static let script = RedisScript(
        source: """
            local results = {}
            for i = 1, #ARGV do
              if ARGV[i] == 'fail' then
                results[i] = {err = 'ERR item ' .. i .. ' failed'}
              else
                results[i] = {ARGV[i], #ARGV, redis.call('INCR', KEYS[1])}
              end
            end
            return results
            """)

    static func head(key: String, maximumItems: Int = 32) -> RedisMultiplexer.BatchHead {
        RedisMultiplexer.BatchHead(argumentCount: 4, script: script, maximumItems: maximumItems) {
            $0.append("EVALSHA")
            $0.append(script.sha1)
            $0.append("1")
            $0.append(key)
        }
    }

    static func item(_ head: RedisMultiplexer.BatchHead, _ argument: String) -> RedisMultiplexer.BatchItem {
        RedisMultiplexer.BatchItem(head: head, argumentCount: 1) { $0.append(argument) }
    }

    @Test func itemsSentTogetherRunAsBatchesAndEachCallerGetsItsOwnElementOrError() async throws {
        let redis = try RedisMultiplexer(url: TestEnvironment.redisURL)
        defer { redis.close() }
        let prefix = RedisTesting.uniquePrefix("mux-batch")
        let head = Self.head(key: prefix + "n", maximumItems: 8)
        let results = await withTaskGroup(of: (Int, Result<RedisReply, any Error>).self) { group in
            for index in 0..<400 {
                group.addTask {
                    let argument = index % 50 == 7 ? "fail" : "item-\(index)"
                    do {
                        return (index, .success(try await redis.send(Self.item(head, argument))))
                    } catch {
                        return (index, .failure(error))
                    }
                }
            }
            var results: [Int: Result<RedisReply, any Error>] = [:]
            for await (index, result) in group { results[index] = result }
            return results
        }
        var counters: [Int64] = []
        var largestBatch: Int64 = 0
        for (index, result) in results {
            if index % 50 == 7 {
                // Only the failing item fails; its batch's other items were answered.
                guard case .failure(let error as RedisError) = result else {
                    Issue.record("item \(index) should have failed")
                    continue
                }
                #expect(error.serverPrefix == "ERR")
                continue
            }
            let elements = try result.get().array ?? []
            #expect(elements.first == .bulk(Array("item-\(index)".utf8)))
            let batchSize = elements.count > 1 ? elements[1].int ?? 0 : 0
            #expect(batchSize >= 1 && batchSize <= 8)
            largestBatch = max(largestBatch, batchSize)
            counters.append(elements.count > 2 ? elements[2].int ?? -1 : -1)
        }
        // Every item that did not fail ran exactly once.
        #expect(Set(counters).count == 392)
        #expect(counters.min() == 1 && counters.max() == 392)
        #expect(largestBatch > 1)
        let client = try RedisTesting.client()
        defer { client.close() }
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func consecutiveItemsOfOneHeadMergeUpToTheirMaximumAndOtherCommandsKeepTheirPlace() {
        let first = Self.head(key: "first", maximumItems: 2)
        let second = Self.head(key: "second")
        let ignore: @Sendable (Result<RedisReply, RedisError>) -> Void = { _ in }
        let submissions: [RedisMultiplexer.Submission] = [
            .item(Self.item(first, "a"), completion: ignore),
            .item(Self.item(first, "b"), completion: ignore),
            .item(Self.item(first, "c"), completion: ignore),
            .request(.init(command: EncodedRedisCommand(RedisCommand("PING")), completion: ignore)),
            .item(Self.item(first, "d"), completion: ignore),
            .item(Self.item(second, "e"), completion: ignore),
        ]
        let commands = RedisMultiplexer.requests(submissions).map { $0.command.bytes }
        func batch(_ key: String, _ items: String...) -> [UInt8] {
            EncodedRedisCommand(RedisCommand("EVALSHA", arguments: [Self.script.sha1, "1", key] + items)).bytes
        }
        #expect(
            commands == [
                batch("first", "a", "b"), batch("first", "c"), EncodedRedisCommand(RedisCommand("PING")).bytes,
                batch("first", "d"), batch("second", "e"),
            ])
    }

    @Test func aFailureOfTheWholeCommandFailsEveryItem() async throws {
        let redis = try RedisMultiplexer(url: TestEnvironment.redisURL)
        defer { redis.close() }
        let broken = RedisScript(source: "return {1}")  // one element for any number of items
        let head = RedisMultiplexer.BatchHead(argumentCount: 3, script: broken, maximumItems: 4) {
            $0.append("EVALSHA")
            $0.append(broken.sha1)
            $0.append("0")
        }
        let failures = await withTaskGroup(of: RedisError.Code?.self) { group in
            for index in 0..<20 {
                group.addTask {
                    do {
                        _ = try await redis.send(Self.item(head, "\(index)"))
                        return nil
                    } catch let error as RedisError {
                        return error.code
                    } catch {
                        return nil
                    }
                }
            }
            var codes: [RedisError.Code?] = []
            for await code in group { codes.append(code) }
            return codes
        }
        // A batch of one gets its one element; larger batches are refused as a whole.
        #expect(failures.allSatisfy { $0 == nil || $0 == .unexpectedReply })
    }

    @Test(.timeLimit(.minutes(1)))
    func itemsWaitWhileTwoBatchesAreUnansweredAndLeaveWhenTheyAre() async throws {
        // The first connection never answers; the second answers every PING with +PONG.
        let server = try ScriptedRedis(connections: [.silent, .answerAll])
        defer { server.stop() }
        let redis = try RedisMultiplexer(
            url: "redis://127.0.0.1:\(server.port)/0",
            options: .init(connectTimeout: .seconds(2), commandTimeout: .milliseconds(300)))
        defer { redis.close() }
        // One item per command, so every item is a batched command of its own.
        let head = RedisMultiplexer.BatchHead(argumentCount: 1, script: nil, maximumItems: 1) { $0.append("PING") }
        let item = RedisMultiplexer.BatchItem(head: head, argumentCount: 0) { _ in }
        let outcomes = Mutex<[Int: RedisError.Code]>([:])
        let done = AsyncStream<Void>.makeStream()
        func send(_ index: Int) {
            redis.send(item) { result in
                guard case .failure(let error) = result else { return }
                let count = outcomes.withLock {
                    $0[index] = error.code
                    return $0.count
                }
                if count == 5 { done.continuation.finish() }
            }
        }
        send(0)
        send(1)
        try await Task.sleep(for: .milliseconds(50))
        for index in 2..<5 { send(index) }
        for await _ in done.stream {}
        // The first two were on the silent connection and timed out; the other three
        // waited for them, then went to the new connection, whose +PONG is not the array
        // a batch answers with.
        let codes = outcomes.withLock { $0 }
        #expect(codes[0] == .timeout && codes[1] == .timeout)
        #expect((2..<5).allSatisfy { codes[$0] == .unexpectedReply })
        #expect(server.accepted == 2)
    }
}
