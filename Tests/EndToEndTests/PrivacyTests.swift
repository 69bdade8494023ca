import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import IngressService

/// After real flows, no ciphertext that was sent is found in the database (a
/// `pg_dump`), nor in Redis outside the stash of a subscription still pending.
@Suite struct PrivacyTests {
    /// The forms a stored ciphertext could take: raw bytes, base64url, standard base64, hex.
    static func needles(_ ciphertext: [UInt8]) -> [[UInt8]] {
        let hex = ciphertext.map { String(format: "%02x", $0) }.joined()
        return [
            ciphertext, Array(Base64URL.encode(ciphertext).utf8), Array(Data(ciphertext).base64EncodedString().utf8),
            Array(hex.utf8),
        ]
    }

    static func contains(_ haystack: [UInt8], _ ciphertext: [UInt8]) -> Bool {
        needles(ciphertext).contains { needle in
            guard let first = needle.first, haystack.count >= needle.count else { return false }
            var index = 0
            let last = haystack.count - needle.count
            while index <= last {
                if haystack[index] == first, haystack[index..<index + needle.count].elementsEqual(needle) { return true }
                index += 1
            }
            return false
        }
    }

    static func pgDump() async throws -> [UInt8] {
        let dump = try await ChildProcess.run(
            "/usr/bin/pg_dump", ["--data-only", "--no-owner", TestEnvironment.databaseURL])
        try #require(dump.status == 0, "pg_dump failed: \(dump.standardError)")
        return dump.output
    }

    /// Every value under the stack's own Redis namespace, by key.
    static func redisValues(_ stack: DeliveryStack) async throws -> [String: [UInt8]] {
        var values: [String: [UInt8]] = [:]
        var cursor = "0"
        repeat {
            let reply = try await stack.redis.send("SCAN", cursor, "MATCH", stack.namespace + ":*", "COUNT", "1000")
            let parts = try #require(reply.array)
            cursor = try #require(parts.first?.string)
            for key in try #require(parts.last?.array).compactMap(\.string) {
                let type = try #require(try await stack.redis.send("TYPE", key).string)
                let content: RedisReply =
                    switch type {
                    case "string": try await stack.redis.send("GET", key)
                    case "list": try await stack.redis.send("LRANGE", key, "0", "-1")
                    case "hash": try await stack.redis.send("HGETALL", key)
                    case "set": try await stack.redis.send("SMEMBERS", key)
                    case "zset": try await stack.redis.send("ZRANGE", key, "0", "-1", "WITHSCORES")
                    case "stream": try await stack.redis.send("XRANGE", key, "-", "+")
                    default: .null
                    }
                values[key] = flatten(content)
            }
        } while cursor != "0"
        return values
    }

    static func flatten(_ reply: RedisReply) -> [UInt8] {
        if let bytes = reply.bytes { return bytes }
        if let array = reply.array { return array.flatMap { flatten($0) + [0] } }
        return []
    }

    @Test func noCiphertextSentIsInTheDatabaseOrInRedisOutsideALiveStash() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            // One device still pending (its verification stashed), one active that received two pushes.
            let pendingApp = try await App.register(stack)
            let stashed = try await Parties.send(Parties.jmap("PushVerification"), to: pendingApp.endpoint, keys: pendingApp.keys)
            #expect(stashed.status == 201)
            let app = try await App.register(stack)
            let verification = try await Parties.send(Parties.jmap("PushVerification"), to: app.endpoint, keys: app.keys)
            #expect(verification.status == 201)
            #expect(try await app.pending().count == 1)
            try await app.activate()
            let change = try await Parties.send(Parties.jmap("StateChange"), to: app.endpoint, keys: app.keys)
            let legacy = try await Parties.send(Parties.jmap("StateChange"), to: app.endpoint, keys: app.keys, legacy: true)
            #expect(change.status == 201)
            #expect(legacy.status == 201)
            try await eventually("both notifications delivered") { stack.recordings(token: app.token).count == 2 }
            try await eventually("the entries acknowledged") {
                let length = try await stack.streamLength()
                let pending = try await stack.pendingCount()
                return length == 0 && pending == 0
            }
            let sent = [stashed.ciphertext, verification.ciphertext, change.ciphertext, legacy.ciphertext]
            // The delivered payloads did carry them (the search looks for what was really there).
            let payloads = stack.recordings(token: app.token).map(\.payload)
            #expect(payloads.contains { Self.contains($0, change.ciphertext) })
            #expect(payloads.contains { Self.contains($0, legacy.ciphertext) })

            let dump = try await Self.pgDump()
            #expect(Self.contains(dump, Array(app.id.utf8)))
            for (index, ciphertext) in sent.enumerated() {
                #expect(!Self.contains(dump, ciphertext), "ciphertext \(index) found in pg_dump")
            }

            let values = try await Self.redisValues(stack)
            let liveStash = stack.keys.stash(pendingApp.id)
            #expect(Self.contains(try #require(values[liveStash]), stashed.ciphertext))
            for (key, value) in values where key != liveStash {
                for (index, ciphertext) in sent.enumerated() {
                    #expect(!Self.contains(value, ciphertext), "ciphertext \(index) found in Redis at \(key)")
                }
            }
        }
    }
}
