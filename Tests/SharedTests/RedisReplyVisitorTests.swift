import Foundation
import Synchronization
import Testing

@testable import Shared

/// Records what a visitor is shown, as `depth/index kind value` lines.
private final class RecordingVisitor: RedisReplyVisitor, Sendable {
    let events = Mutex<[String]>([])

    func visitArray(depth: Int, index: Int, count: Int) { note("\(depth)/\(index) array \(count)") }
    func visitBulk(depth: Int, index: Int, bytes: UnsafeRawBufferPointer) {
        note("\(depth)/\(index) bulk \(Array(bytes))")
    }
    func visitInteger(depth: Int, index: Int, value: Int64) { note("\(depth)/\(index) integer \(value)") }
    func visitNull(depth: Int, index: Int) { note("\(depth)/\(index) null") }
    func visitStatus(depth: Int, index: Int, text: UnsafeRawBufferPointer) {
        note("\(depth)/\(index) status \(String(decoding: text, as: UTF8.self))")
    }
    private func note(_ event: String) { events.withLock { $0.append(event) } }
}

@Suite struct RedisReplyVisitorTests {
    @Test func aNestedReplyIsVisitedInOrderWithDepthsAndIndexesAndTheConnectionStaysUsable() async throws {
        let client = try RedisTesting.client(maximumConnections: 1)
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("visitor")
        let stream = prefix + "stream"
        let id = try #require(try await client.send("XADD", stream, "1-1", "f", [UInt8]([0, 255]), "n", "7").string)
        #expect(id == "1-1")

        let visitor = RecordingVisitor()
        try await client.send(RedisCommand("XRANGE", stream, "-", "+"), visitor: visitor)
        #expect(
            visitor.events.withLock { $0 } == [
                "0/0 array 1", "1/0 array 2", "2/0 bulk \(Array("1-1".utf8))", "2/1 array 4",
                "3/0 bulk \(Array("f".utf8))", "3/1 bulk [0, 255]", "3/2 bulk \(Array("n".utf8))",
                "3/3 bulk \(Array("7".utf8))",
            ])

        let scalars = RecordingVisitor()
        try await client.send(RedisCommand("EVAL", "return {1, false, {ok='fine'}}", 0), visitor: scalars)
        #expect(
            scalars.events.withLock { $0 } == ["0/0 array 3", "1/0 integer 1", "1/1 null", "1/2 status fine"])

        // The same (only) connection goes on with ordinary replies.
        #expect(try await client.send("XLEN", stream) == .integer(1))
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func anErrorReplyIsThrownAndTheVisitorSeesNothing() async throws {
        let client = try RedisTesting.client(maximumConnections: 1)
        defer { client.close() }
        let visitor = RecordingVisitor()
        await #expect(throws: RedisError.self) {
            try await client.send(
                RedisCommand("XREADGROUP", "GROUP", "nogroup", "c", "STREAMS", "pushgate-test:missing", ">"),
                visitor: visitor)
        }
        #expect(visitor.events.withLock { $0 }.isEmpty)
        #expect(try await client.send("PING") == .status("PONG"))
    }

    /// A read given its own timeout (a blocking read's) that gets an error reply puts
    /// the connection's command timeout back, as a successful one does: the pooled
    /// connection's next command must not wait longer than configured on a hung Redis.
    @Test func anErrorReplyToAReadWithItsOwnTimeoutRestoresTheCommandTimeout() async throws {
        let client = try RedisTesting.client(maximumConnections: 1, commandTimeout: .milliseconds(300))
        defer { client.close() }
        await #expect(throws: RedisError.self) {
            try await client.send(
                RedisCommand("XREADGROUP", "GROUP", "nogroup", "c", "STREAMS", "pushgate-test:missing", ">"),
                timeout: .seconds(10), visitor: RecordingVisitor())
        }
        // Blocks 2 s, over the 300 ms command timeout: refused as unanswered in time.
        let started = ContinuousClock.now
        await #expect(throws: RedisError.self) {
            try await client.send("BLPOP", RedisTesting.uniquePrefix("timeout") + "none", 2)
        }
        #expect(ContinuousClock.now - started < .seconds(1))
    }

    @Test func encodedCommandsArePipelinedAsWritten() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let key = RedisTesting.uniquePrefix("encoded") + "n"
        let replies = try await client.pipeline(encoded: [
            EncodedRedisCommand(argumentCount: 3) {
                $0.append("SET")
                $0.append(key)
                $0.append(Int64(41))
            },
            EncodedRedisCommand(RedisCommand("INCR", key)), EncodedRedisCommand(RedisCommand("NOSUCHCOMMAND")),
            EncodedRedisCommand(RedisCommand("DEL", key)),
        ])
        #expect(replies.count == 4)
        #expect(replies[0] == .status("OK"))
        #expect(replies[1] == .integer(42))
        #expect(replies[2].error != nil)
        #expect(replies[3] == .integer(1))
    }
}
