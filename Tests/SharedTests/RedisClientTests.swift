import Foundation
import TestSupport
import Testing

@testable import Shared

/// Helpers for the Redis suites: a client on `TestEnvironment.redisURL` and key
/// prefixes unique to one test, so suites can run in parallel on one server.
enum RedisTesting {
    static func client(maximumConnections: Int = 4, commandTimeout: Duration = .seconds(5)) throws -> RedisClient {
        try RedisClient(
            url: TestEnvironment.redisURL,
            options: .init(
                maximumConnections: maximumConnections, acquireTimeout: .seconds(5),
                connection: .init(connectTimeout: .seconds(2), commandTimeout: commandTimeout)))
    }

    static func uniquePrefix(_ test: String) -> String {
        "pushgate-test:\(test):\(UInt64.random(in: 0...UInt64.max)):"
    }

    /// Deletes every key under `prefix`.
    static func cleanUp(_ client: RedisClient, prefix: String) async throws {
        let keys = try await client.send("KEYS", prefix + "*").array ?? []
        if !keys.isEmpty {
            _ = try await client.send(RedisCommand(argv: [Array("DEL".utf8)] + keys.compactMap(\.bytes)))
        }
    }

    static func url(password: String?, username: String? = nil, database: Int? = nil) throws -> RedisURL {
        var url = try RedisURL(TestEnvironment.redisURL)
        url.password = password
        url.username = username
        if let database { url.database = database }
        return url
    }
}

@Suite struct RedisClientTests {
    @Test func bytesWithNULAndInvalidUTF8RoundTripExactly() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("binary")
        let key = Array(prefix.utf8) + [0x00, 0xff, 0x6b]
        let value: [UInt8] = [0x00, 0xff, 0xfe, 0xc3, 0x28, 0x00, 0x0d, 0x0a, 0x24, 0x2d, 0x31, 0x0d, 0x0a, 0x00]

        #expect(try await client.send(argv: [Array("SET".utf8), key, value]) == .status("OK"))
        #expect(try await client.send(argv: [Array("GET".utf8), key]) == .bulk(value))
        #expect(try await client.send(argv: [Array("STRLEN".utf8), key]) == .integer(14))
        #expect(try await client.send("GET", key).string == nil)  // not valid UTF-8
        #expect(try await client.send(argv: [Array("DEL".utf8), key]) == .integer(1))

        let empty = prefix + "empty"
        _ = try await client.send("SET", empty, [UInt8]())
        #expect(try await client.send("GET", empty) == .bulk([]))
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func repliesAreTypedAsIntegerBulkNullArrayAndStatus() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("typed")

        let status = try await client.send("SET", prefix + "s", "héllo")
        #expect(status == .status("OK"))
        #expect(status.string == "OK")
        let bulk = try await client.send("GET", prefix + "s")
        #expect(bulk == .bulk(Array("héllo".utf8)))
        #expect(bulk.string == "héllo")
        let integer = try await client.send("INCRBY", prefix + "n", 41)
        #expect(integer == .integer(41))
        #expect(integer.int == 41)
        #expect(try await client.send("INCRBY", prefix + "n", Int64(-42)).int == -1)
        let missing = try await client.send("GET", prefix + "missing")
        #expect(missing == .null)
        #expect(missing.isNull)
        #expect(try await client.send("RPUSH", prefix + "l", "a", [UInt8]([0, 1]), 3) == .integer(3))
        let array = try await client.send("LRANGE", prefix + "l", 0, -1)
        #expect(array == .array([.bulk(Array("a".utf8)), .bulk([0, 1]), .bulk(Array("3".utf8))]))
        #expect(array.array?.count == 3)
        #expect(array.array?[2].int == 3)
        #expect(
            try await client.send("MGET", prefix + "s", prefix + "missing")
                == .array([.bulk(Array("héllo".utf8)), .null]))
        #expect(try await client.send("LRANGE", prefix + "missing", 0, -1) == .array([]))
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func errorReplyIsThrownAsTypedServerErrorWithoutArguments() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("wrongtype")
        _ = try await client.send("SET", prefix + "secret-key", "secret-value")

        let error = try await #require(throws: RedisError.self) {
            try await client.send("LPUSH", prefix + "secret-key", "secret-value")
        }
        #expect(error.code == .server("WRONGTYPE"))
        #expect(error.command == "LPUSH")
        #expect(error.serverMessage == "WRONGTYPE Operation against a key holding the wrong kind of value")
        #expect(
            error.description
                == "redis server WRONGTYPE error (LPUSH): WRONGTYPE Operation against a key holding the wrong kind of value"
        )

        let unknown = try await #require(throws: RedisError.self) {
            try await client.send("NOSUCHCOMMAND", "secret-argument")
        }
        #expect(unknown.code == .server("ERR"))
        #expect(unknown.serverMessage?.contains("secret-argument") == true)
        #expect(!unknown.description.contains("secret"))
        #expect(unknown.description == "redis server ERR error (NOSUCHCOMMAND): ERR unknown command …")

        // The connection survives an error reply.
        #expect(try await client.send("PING") == .status("PONG"))
        #expect(client.openConnections == 1)
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func pipelineOfOneThousandCommandsReturnsOneThousandRepliesInOrder() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("pipeline")
        let commands = (0..<1000).map { index in
            index % 2 == 0 ? RedisCommand("ECHO", "value-\(index)") : RedisCommand("INCR", prefix + "counter")
        }
        let replies = try await client.pipeline(commands)
        #expect(replies.count == 1000)
        var expected: [RedisReply] = []
        for index in 0..<1000 {
            if index % 2 == 0 {
                expected.append(.bulk(Array("value-\(index)".utf8)))
            } else {
                expected.append(.integer(Int64(index / 2 + 1)))
            }
        }
        #expect(replies == expected)
        #expect(try await client.send("GET", prefix + "counter") == .bulk(Array("500".utf8)))
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func errorInsidePipelineStaysInItsSlotAndOthersSucceed() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("pipeline-error")
        let replies = try await client.pipeline([
            RedisCommand("SET", prefix + "s", "x"),
            RedisCommand("INCR", prefix + "s"),
            RedisCommand("GET", prefix + "s"),
        ])
        #expect(replies.count == 3)
        #expect(replies[0] == .status("OK"))
        #expect(replies[1].error?.code == .server("ERR"))
        #expect(replies[1].error?.command == "INCR")
        #expect(replies[2] == .bulk(Array("x".utf8)))
        #expect(try await client.pipeline([]) == [])
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func leasedConnectionKeepsStateAcrossCommands() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("multi")
        let replies = try await client.withConnection { connection in
            _ = try await connection.send("MULTI")
            #expect(try await connection.send("INCR", prefix + "n") == .status("QUEUED"))
            #expect(try await connection.send("INCR", prefix + "n") == .status("QUEUED"))
            return try await connection.send("EXEC")
        }
        #expect(replies == .array([.integer(1), .integer(2)]))
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func wrongPasswordForDefaultUserIsAnAuthenticationError() async throws {
        let url = try RedisTesting.url(password: "wrong-secret-password")
        let error = try await #require(throws: RedisError.self) {
            try await RedisConnection.connect(to: url)
        }
        #expect(error.code == .authentication)
        #expect(error.command == "AUTH")
        #expect(!error.description.contains("wrong-secret-password"))
    }

    @Test func aclUserConnectsWithItsPasswordAndIsRefusedWithAWrongOne() async throws {
        let client = try RedisTesting.client()
        defer { client.close() }
        let user = "pushgate-test-\(UInt32.random(in: 0...UInt32.max))"
        let password = "pw-\(UInt64.random(in: 0...UInt64.max))"
        _ = try await client.send("ACL", "SETUSER", user, "on", ">" + password, "~*", "+@all")
        defer { Task { _ = try? await RedisTesting.client().send("ACL", "DELUSER", user) } }

        let good = try await RedisConnection.connect(
            to: RedisTesting.url(password: password, username: user, database: 1))
        #expect(try await good.send("ACL", "WHOAMI") == .bulk(Array(user.utf8)))
        #expect(try await good.send("CLIENT", "INFO").string?.contains(" db=1 ") == true)
        good.close()
        good.close()  // idempotent

        let bad = try await #require(throws: RedisError.self) {
            try await RedisConnection.connect(to: RedisTesting.url(password: "not-" + password, username: user))
        }
        #expect(bad.code == .authentication)
        #expect(bad.serverPrefix == "WRONGPASS")
        #expect(!bad.description.contains(password))
        _ = try await client.send("ACL", "DELUSER", user)
    }

    @Test func databaseOutOfRangeIsADatabaseError() async throws {
        let url = try RedisTesting.url(password: nil, database: 9999)
        let error = try await #require(throws: RedisError.self) {
            try await RedisConnection.connect(to: url)
        }
        #expect(error.code == .database)
        #expect(error.command == "SELECT")
        #expect(error.description.contains("9999"))
    }

    @Test func refusedConnectionIsAConnectionError() async throws {
        let error = try await #require(throws: RedisError.self) {
            try await RedisConnection.connect(to: RedisURL(host: "127.0.0.1", port: 1))
        }
        #expect(error.code == .connection)
        #expect(error.description.contains("Connection refused"))
        #expect(!error.mayHaveRun, "nothing was sent")
    }

    @Test func commandTimeoutIsTypedAndTheClientReplacesTheConnection() async throws {
        let client = try RedisTesting.client(maximumConnections: 1, commandTimeout: .milliseconds(200))
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("timeout")
        // Without the 200 ms timeout BLPOP would answer nil (no error) after 10 s.
        let error = try await #require(throws: RedisError.self) {
            try await client.send("BLPOP", prefix + "never", 10)
        }
        #expect(error.code == .timeout)
        #expect(error.command == "BLPOP")
        #expect(error.mayHaveRun, "sent, then no answer: it may have run")
        // The timed-out connection was discarded; the next lease opens a new one (given
        // more than 200 ms: a loaded machine may be slow to answer, which is not this test's subject).
        #expect(try await client.send(RedisCommand("PING"), timeout: .seconds(5)) == .status("PONG"))
        #expect(client.openConnections == 1)
    }

    @Test func perCallTimeoutLetsABlockingCommandWaitLongerThanTheCommandTimeout() async throws {
        let client = try RedisTesting.client(maximumConnections: 1, commandTimeout: .milliseconds(200))
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("blocking")
        let reply = try await client.send(RedisCommand("BLPOP", prefix + "never", "0.5"), timeout: .seconds(3))
        #expect(reply == .null)
        // Same connection, back to the 200 ms command timeout.
        let error = try await #require(throws: RedisError.self) {
            try await client.send("BLPOP", prefix + "never", 1)
        }
        #expect(error.code == .timeout)
        let port = try RedisURL(TestEnvironment.redisURL).port
        #expect(
            error.description == "redis timeout error (BLPOP): 127.0.0.1:\(port)/0 did not answer within 0.2 seconds")
    }

    @Test func idleConnectionKilledByTheServerIsReplacedBeforeItsNextLease() async throws {
        let client = try RedisTesting.client(maximumConnections: 1)
        defer { client.close() }
        let firstID = try #require(try await client.send("CLIENT", "ID").int)

        let killer = try await RedisConnection.connect(to: RedisURL(TestEnvironment.redisURL))
        defer { killer.close() }
        #expect(try await killer.send("CLIENT", "KILL", "ID", firstID) == .integer(1))
        try await Task.sleep(for: .milliseconds(100))

        let secondID = try #require(try await client.send("CLIENT", "ID").int)
        #expect(secondID != firstID)
        #expect(client.openConnections == 1)
    }

    @Test func closedConnectionRefusesCommandsWithClosedError() async throws {
        let connection = try await RedisConnection.connect(to: RedisURL(TestEnvironment.redisURL))
        #expect(connection.isUsable)
        connection.close()
        #expect(!connection.isUsable)
        let error = try await #require(throws: RedisError.self) { try await connection.send("PING") }
        #expect(error.code == .closed)
    }
}

@Suite struct RedisURLTests {
    @Test(arguments: [
        ("redis://127.0.0.1:56379/0", RedisURL(host: "127.0.0.1", port: 56379)),
        ("redis://localhost", RedisURL(host: "localhost", port: 6379)),
        ("redis://cache.internal:7000/3", RedisURL(host: "cache.internal", port: 7000, database: 3)),
        ("redis://:s%40cret@h:1/", RedisURL(host: "h", port: 1, password: "s@cret")),
        ("redis://app:pw@h:2/5", RedisURL(host: "h", port: 2, username: "app", password: "pw", database: 5)),
        ("redis://default:pw@h", RedisURL(host: "h", password: "pw")),
        ("redis://[::1]:6380", RedisURL(host: "::1", port: 6380)),
    ])
    func validURLParses(text: String, expected: RedisURL) throws {
        #expect(try RedisURL(text) == expected)
    }

    @Test(arguments: [
        ("http://h:1", "REDIS_URL must start with redis://"),
        ("rediss://:pw@h:1", "REDIS_URL asks for TLS (rediss://), which this build does not support"),
        ("redis://h:1/x", "REDIS_URL must end in /<database number>"),
        ("redis://h:1/0?timeout=1", "REDIS_URL must not have a query or fragment"),
        (
            "redis://user@h:1",
            "REDIS_URL has a user but no password (write redis://:password@host for a password alone)"
        ),
        ("redis:///0", "REDIS_URL has no host"),
    ])
    func invalidURLIsRefusedWithReason(text: String, message: String) {
        #expect {
            try RedisURL(text)
        } throws: { error in
            (error as? RedisError)?.code == .invalidURL && (error as? RedisError)?.message == message
        }
    }

    @Test func descriptionHidesThePassword() throws {
        let url = try RedisURL("redis://app:hunter2@h:2/5")
        #expect(url.description == "redis://app:***@h:2/5")
        #expect(try RedisURL("redis://:hunter2@h").description == "redis://:***@h:6379/0")
        #expect(try RedisURL("redis://h").description == "redis://h:6379/0")
    }
}
