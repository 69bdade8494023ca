import TestSupport
import Testing

@testable import Shared

@Suite struct RedisScriptTests {
    static let echo = RedisScript(source: "return {KEYS[1], ARGV[1], tonumber(ARGV[2]) + 1}")

    @Test func sha1IsComputedLocallyAsRedisComputesIt() async throws {
        #expect(RedisScript(source: "return 1").sha1 == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db")
        #expect(RedisScript(source: "").sha1 == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        let client = try RedisTesting.client()
        defer { client.close() }
        #expect(try await client.send("SCRIPT", "LOAD", Self.echo.source) == .bulk(Array(Self.echo.sha1.utf8)))
    }

    @Test func scriptRunsWithKeysAndArguments() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let reply = try await client.run(Self.echo, keys: ["k\u{0}1"], arguments: [[UInt8]([0xff, 0x00]), 41])
        #expect(reply == .array([.bulk(Array("k\u{0}1".utf8)), .bulk([0xff, 0x00]), .integer(42)]))
        // Second run on the same (pooled) connection: EVALSHA only.
        #expect(try await client.run(Self.echo, keys: ["a"], arguments: ["b", 1]).array?[2] == .integer(2))
    }

    @Test func scriptStillRunsAfterScriptFlush() async throws {
        let client = try RedisTesting.client(maximumConnections: 1)
        defer { client.close() }
        let script = RedisScript(source: "return 'flush-\(UInt64.random(in: 0...UInt64.max))' .. ARGV[1]")
        let expected = RedisReply.bulk(Array((script.source.split(separator: "'")[1] + "x").utf8))
        #expect(try await client.run(script, arguments: ["x"]) == expected)

        _ = try await client.send("SCRIPT", "FLUSH")
        #expect(try await client.send("SCRIPT", "EXISTS", script.sha1) == .array([.integer(0)]))
        // The connection had loaded it, so this is EVALSHA → NOSCRIPT → SCRIPT LOAD → EVALSHA.
        #expect(try await client.run(script, arguments: ["x"]) == expected)
    }

    @Test func scriptInsidePipelineStillRunsAfterScriptFlush() async throws {
        let client = try RedisTesting.client(maximumConnections: 1)
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("script-pipeline")
        let script = RedisScript(source: "return redis.call('INCRBY', KEYS[1], ARGV[1]) -- \(prefix)")
        let commands = [
            RedisCommand("SET", prefix + "n", 10),
            RedisCommand.script(script, keys: [prefix + "n"], arguments: [5]),
            RedisCommand("ECHO", "after"),
        ]
        #expect(try await client.pipeline(commands) == [.status("OK"), .integer(15), .bulk(Array("after".utf8))])

        _ = try await client.send("SCRIPT", "FLUSH")
        #expect(try await client.pipeline(commands) == [.status("OK"), .integer(15), .bulk(Array("after".utf8))])
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func encodedScriptIsLoadedOnFirstUseAndAgainAfterScriptFlush() async throws {
        let client = try RedisTesting.client(maximumConnections: 1)
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("script-encoded")
        let script = RedisScript(source: "return redis.call('INCRBY', KEYS[1], ARGV[1]) -- \(prefix)")
        let command = EncodedRedisCommand.script(script, keys: [prefix + "n"], argumentCount: 1) { $0.append(Int64(5)) }
        #expect(try await client.send(encoded: command) == .integer(5))
        #expect(try await client.send(encoded: command) == .integer(10))

        _ = try await client.send("SCRIPT", "FLUSH")
        #expect(try await client.send(encoded: command) == .integer(15))
        #expect(try await client.send("GET", prefix + "n") == .bulk(Array("15".utf8)))
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func encodedScriptThatDoesNotCompileIsThrownAsItsLoadError() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let script = RedisScript(source: "this is not lua")
        let command = EncodedRedisCommand.script(script, keys: [], argumentCount: 0) { _ in }
        let error = try await #require(throws: RedisError.self) { try await client.send(encoded: command) }
        #expect(error.code == .server("ERR"))
        #expect(error.serverMessage?.hasPrefix("ERR Error compiling script") == true)
    }

    @Test func scriptRuntimeErrorIsThrownAsServerError() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let script = RedisScript(source: "return redis.error_reply('BOOM secret-detail')")
        let error = try await #require(throws: RedisError.self) { try await client.run(script) }
        #expect(error.code == .server("BOOM"))
        #expect(error.command == "EVALSHA")
    }

    @Test func scriptThatDoesNotCompileReportsTheCompileErrorNotNoscript() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let script = RedisScript(source: "this is not lua")
        let error = try await #require(throws: RedisError.self) { try await client.run(script) }
        #expect(error.code == .server("ERR"))
        #expect(error.serverMessage?.hasPrefix("ERR Error compiling script") == true)
    }
}
