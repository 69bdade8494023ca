import Foundation
import TestSupport
import Testing

@testable import Shared

/// After a failover, the endpoint's former primary is a read-only replica, and a
/// connection still open to it would fail every write for as long as it lives. A
/// `READONLY` answer makes the client give that connection up, so the next command
/// goes out on a new one, to whatever primary the endpoint names by then. Here a
/// private `redis-server` starts as a replica (of nothing: read-only) and is then
/// promoted, standing in for the endpoint's new primary.
@Suite struct RedisReadOnlyReplicaTests {
    static func withReplica(_ body: (PrivateRedis) async throws -> Void) async throws {
        try await PrivateRedis.with(arguments: ["--replicaof", "127.0.0.1", "\(try UnusedPort.loopback())"], body)
    }

    @Test func aPooledConnectionThatReachesAReplicaIsReplaced() async throws {
        try await Self.withReplica { server in
            let client = try RedisClient(url: server.url, options: .init(maximumConnections: 1))
            defer { client.close() }
            let first = try await client.send("CLIENT", "ID").int
            await #expect(throws: RedisError.self) { try await client.send("SET", "key", "value") }
            try await server.cli(["replicaof", "no", "one"])
            let second = try await client.send("CLIENT", "ID").int
            #expect(first != nil && second != nil && first != second, "a new connection after READONLY")
            #expect(try await client.send("SET", "key", "value") == .status("OK"))
            #expect(try await client.send("CLIENT", "ID").int == second, "kept while it answers as a primary")
        }
    }

    /// The hot path's pipelined connection, with a script whose items fail one by one
    /// (its writes are refused inside `pcall`, as the hot-path script's are).
    @Test func theMultiplexersConnectionThatReachesAReplicaIsReplaced() async throws {
        try await Self.withReplica { server in
            let redis = try RedisMultiplexer(url: server.url)
            defer { redis.close() }
            let script = RedisScript(
                source: """
                    local ok, err = pcall(redis.call, 'SET', KEYS[1], 'value')
                    if ok then return {1} end
                    return {{err = type(err) == 'table' and err.err or tostring(err)}}
                    """)
            let first = try await redis.send("CLIENT", "ID").int
            let refused = try await redis.run(script, keys: ["key"])
            #expect(refused.array?.first?.error?.serverPrefix == "READONLY")
            try await server.cli(["replicaof", "no", "one"])
            let second = try await redis.send("CLIENT", "ID").int
            #expect(first != nil && second != nil && first != second, "a new connection after READONLY")
            #expect(try await redis.run(script, keys: ["key"]) == .array([.integer(1)]))
        }
    }

    @Test func onlyAReadOnlyAnswerCounts() {
        let readOnly = RedisReply.error(RedisError(serverReply: "READONLY You can't write", command: "SET"))
        let other = RedisReply.error(RedisError(serverReply: "ERR wrong", command: "SET"))
        #expect(readOnly.isFromReadOnlyReplica)
        #expect(RedisReply.array([.integer(1), readOnly]).isFromReadOnlyReplica)
        #expect(!other.isFromReadOnlyReplica)
        #expect(!RedisReply.array([.integer(1), other]).isFromReadOnlyReplica)
        #expect(!RedisReply.status("OK").isFromReadOnlyReplica)
    }
}
