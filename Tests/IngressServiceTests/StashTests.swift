import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

@Suite struct StashTests {
    func pending(_ app: IngressTestApp, _ id: String, _ secret: String) async throws -> [String] {
        let response = try await app.request(
            "GET", "/api/push/v1/subscriptions/\(id)/pending", headers: [("Authorization", "Bearer \(secret)")])
        try #require(response.status == 200)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: [String]])
        return try #require(object["messages"])
    }

    /// How many of `id`'s stash keys (messages, topics) Redis holds.
    func stashKeys(_ app: IngressTestApp, _ id: String) async throws -> Int64 {
        try await app.redis.send(RedisCommand("EXISTS", arguments: app.keys.pendingStash(id))).int ?? -1
    }

    @Test func sixPushesWhilePendingKeepTheFiveNewestInOrderAndNothingIsQueued() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            var sent: [[UInt8]] = []
            for _ in 0..<6 {
                let message = Fixture.message()
                sent.append(message)
                let response = try await app.push(id, body: message)
                #expect(response.status == 201)
                #expect(response.headers["location"] != nil)
                #expect(response.headers["ttl"] == "60")
            }
            #expect(try await pending(app, id, secret) == sent.suffix(5).map(Base64URL.encode))
            #expect(try await app.queueLength() == 0)
            #expect(app.app.metrics.pushes.value("stashed", "") == 6)
            // HEAD wherever GET is (RFC 9110 §9.1): the status and headers, no body.
            let head = try await app.request(
                "HEAD", "/api/push/v1/subscriptions/\(id)/pending", headers: [("Authorization", "Bearer \(secret)")])
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(head.headers["content-type"] == "application/json")
        }
    }

    /// RFC 8030, section 5.4: a push with a Topic replaces the stashed message of its
    /// topic; pushes without one, or with another, are kept.
    @Test func aPushWithATopicReplacesTheStashedMessageOfThatTopic() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            func push(topic: String?) async throws -> [UInt8] {
                let message = Fixture.message()
                let headers = Fixture.pushHeaders + (topic.map { [("Topic", $0)] } ?? [])
                let response = try await app.push(id, body: message, headers: headers)
                #expect(response.status == 201)
                return message
            }
            let firstInbox = try await push(topic: "inbox")
            let untagged = try await push(topic: nil)
            let calendar = try await push(topic: "calendar")
            let secondInbox = try await push(topic: "inbox")
            #expect(
                try await pending(app, id, secret)
                    == [untagged, calendar, secondInbox].map(Base64URL.encode))
            #expect(firstInbox != secondInbox)
            let thirdInbox = try await push(topic: "inbox")
            #expect(
                try await pending(app, id, secret)
                    == [untagged, calendar, thirdInbox].map(Base64URL.encode))
            // A TTL of 0 keeps nothing, but still replaces its topic's message.
            let discarded = try await app.push(
                id, headers: [("TTL", "0"), ("Content-Encoding", "aes128gcm"), ("Topic", "inbox")])
            #expect(discarded.status == 201)
            #expect(discarded.headers["ttl"] == "0")
            #expect(try await pending(app, id, secret) == [untagged, calendar].map(Base64URL.encode))
            #expect(try await app.redis.send("HEXISTS", app.keys.stashTopics(id), "inbox").int == 0)
            _ = try await push(topic: "inbox")
            // Entries keep the one format every version reads: `<ms>:<ciphertext>`.
            let entries = try await app.redis.send("LRANGE", app.keys.stash(id), 0, -1).array ?? []
            #expect(entries.compactMap(\.bytes).allSatisfy { $0.prefix(13).allSatisfy { (48...57).contains($0) } })
            // Activation drops the stash and what it knew of topics.
            let activated = try await app.request(
                "POST", "/api/push/v1/subscriptions/\(id)/activate", headers: [("Authorization", "Bearer \(secret)")])
            #expect(activated.status == 204)
            #expect(try await stashKeys(app, id) == 0)
        }
    }

    /// The topics hash forgets topics whose message left the stash, so a sender using a
    /// new Topic on every push cannot grow it past the stash's size.
    @Test func theTopicsOfMessagesThatLeftTheStashAreForgotten() async throws {
        try await IngressTestApp.with(["STASH_MAX_MESSAGES": "2"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic, activate: false)
            for index in 0..<10 {
                let response = try await app.push(id, headers: Fixture.pushHeaders + [("Topic", "t\(index)")])
                #expect(response.status == 201)
            }
            #expect(try await app.redis.send("LLEN", app.keys.stash(id)).int == 2)
            #expect(try await app.redis.send("HLEN", app.keys.stashTopics(id)).int ?? 99 <= 3)
            // Deleting the subscription drops them too.
            let (deleted, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            #expect(try await app.push(deleted, headers: Fixture.pushHeaders + [("Topic", "x")]).status == 201)
            let response = try await app.request(
                "DELETE", "/api/push/v1/subscriptions/\(deleted)", headers: [("Authorization", "Bearer \(secret)")])
            #expect(response.status == 204)
            #expect(try await stashKeys(app, deleted) == 0)
            // Nor does the stash expiry keep it scheduled.
            #expect(try await app.redis.send("ZSCORE", app.keys.stashesDue, deleted) == .null)
        }
    }

    /// The stash list's own expiry follows its newest message: an older one must still
    /// leave Redis when its own lifetime ends, not only be hidden by GET /pending (the
    /// spec: stashed ciphertext "is discarded after 30 minutes").
    @Test func anOlderStashedMessageLeavesRedisAtTheEndOfItsOwnLifetime() async throws {
        try await IngressTestApp.with(["STASH_TTL_SECONDS": "5"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic, activate: false)
            func stashed() async throws -> [[UInt8]] {
                try await app.redis.send("LRANGE", app.keys.stash(id), 0, -1).array?.compactMap(\.bytes) ?? []
            }
            let older = Fixture.message()
            let start = ContinuousClock.now
            #expect(try await app.push(id, body: older).status == 201)
            try await Task.sleep(until: start + .milliseconds(2500))
            let newer = Fixture.message()
            #expect(try await app.push(id, body: newer).status == 201)
            #expect(try await stashed().count == 2)
            // The older one goes at ~5 s (within the removal's second), while the newer
            // one lives on to ~7.5 s: a window of 1.5 s or more to see the one without the other.
            #expect(
                try await Poll.until(timeout: .seconds(10), interval: .milliseconds(50)) {
                    let entries = try await stashed()
                    return entries.count == 1 && entries[0].suffix(newer.count).elementsEqual(newer)
                })
            #expect(ContinuousClock.now - start >= .seconds(5))
            // Once both are gone, the stash leaves the due set too.
            #expect(
                try await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
                    try await app.redis.send("ZSCORE", app.keys.stashesDue, id) == .null
                })
            #expect(try await stashed().isEmpty)
        }
    }

    /// RFC 8030, section 5.2: a stashed message is kept no longer than its own TTL
    /// (the 201 says so), however long the stash keeps others, and leaves Redis then;
    /// a TTL of 0 is not kept at all and pushes nothing out of a full stash.
    @Test func aStashedMessageIsKeptNoLongerThanItsTTL() async throws {
        try await IngressTestApp.with(["STASH_TTL_SECONDS": "60"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            func push(ttl: Int) async throws -> [UInt8] {
                let message = Fixture.message()
                let response = try await app.push(
                    id, body: message, headers: [("TTL", String(ttl)), ("Content-Encoding", "aes128gcm")])
                #expect(response.status == 201)
                #expect(response.headers["ttl"] == String(min(ttl, 60)))
                return message
            }
            func stored() async throws -> Int {
                try await app.redis.send("LRANGE", app.keys.stash(id), 0, -1).array?.count ?? -1
            }
            var lasting: [[UInt8]] = []
            for _ in 0..<4 { lasting.append(try await push(ttl: 3600)) }
            let start = ContinuousClock.now
            let brief = try await push(ttl: 2)
            let listed = try await pending(app, id, secret)
            // Read within its lifetime (unless this machine stalled for seconds).
            if ContinuousClock.now - start < .seconds(2) {
                #expect(listed == (lasting + [brief]).map(Base64URL.encode))
            }
            // TTL 0: answered, never listed, and the full stash keeps all it had.
            _ = try await push(ttl: 0)
            #expect(try await stored() == 5)
            #expect(app.app.metrics.pushes.value("discarded", "") == 1)
            #expect(app.app.metrics.pushes.value("stashed", "") == 5)
            #expect(
                try await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
                    try await pending(app, id, secret) == lasting.map(Base64URL.encode)
                })
            #expect(ContinuousClock.now - start >= .seconds(2))
            // And it leaves Redis (StashExpiry), though the list lives on for the others.
            #expect(
                try await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
                    try await stored() == 4
                })
            #expect(try await pending(app, id, secret) == lasting.map(Base64URL.encode))
        }
    }

    @Test func stashedMessagesExpireAfterTheConfiguredLifetime() async throws {
        try await IngressTestApp.with(["STASH_TTL_SECONDS": "3"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            // Kept 3 s, not the day asked for: the answer's TTL says so (RFC 8030 §5.2).
            let start = ContinuousClock.now
            let stashed = try await app.push(id, headers: [("TTL", "86400"), ("Content-Encoding", "aes128gcm")])
            #expect(stashed.status == 201)
            #expect(stashed.headers["ttl"] == "3")
            let listed = try await pending(app, id, secret).count
            // Read within its lifetime (unless this machine stalled for seconds).
            if ContinuousClock.now - start < .seconds(3) { #expect(listed == 1) }
            #expect(
                try await Poll.until(timeout: .seconds(10), interval: .milliseconds(250)) {
                    try await pending(app, id, secret).isEmpty
                })
            #expect(ContinuousClock.now - start >= .seconds(3))
        }
    }

    /// Every push renews the stash list's expiry, so an entry past its own lifetime
    /// must leave Redis when the next push is stashed, not only be hidden by GET /pending.
    @Test func anExpiredEntryLeavesRedisWhenTheNextPushIsStashed() async throws {
        try await IngressTestApp.with(["STASH_TTL_SECONDS": "2"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            let (first, second, third) = (Fixture.message(), Fixture.message(), Fixture.message())
            #expect(try await app.push(id, body: first).status == 201)
            try await Task.sleep(for: .milliseconds(1200))
            // The list now lives until 2 s after this push.
            #expect(try await app.push(id, body: second).status == 201)
            try await Task.sleep(for: .milliseconds(1200))
            // `first` is 2.4 s old: past its lifetime, though the list is not.
            #expect(try await app.push(id, body: third).status == 201)
            let stored = try await app.redis.send("LRANGE", app.keys.stash(id), 0, -1).array ?? []
            let ciphertexts = stored.compactMap { item in
                item.bytes.map { Array($0.drop { $0 != UInt8(ascii: ":") }.dropFirst()) }
            }
            let keptFirst = ciphertexts.contains(first)
            let lastIsThird = ciphertexts.last == third
            #expect(!keptFirst)
            #expect(lastIsThird)
            #expect(try await pending(app, id, secret).last == Base64URL.encode(third))
        }
    }

    @Test func activateClearsTheStashAndLaterPushesAreQueued() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            #expect(try await app.push(id).status == 201)
            #expect(try await app.redis.send("ZSCORE", app.keys.stashesDue, id) != .null)
            let activated = try await app.request(
                "POST", "/api/push/v1/subscriptions/\(id)/activate", headers: [("Authorization", "Bearer \(secret)")])
            #expect(activated.status == 204)
            #expect(try await pending(app, id, secret).isEmpty)
            #expect(try await app.redis.send("ZSCORE", app.keys.stashesDue, id) == .null)
            let state = try await app.postgres.query("SELECT state FROM subscriptions WHERE id = \(id)")
            #expect(try state.first?.decode("state", as: String.self) == "active")
            let message = Fixture.message()
            #expect(try await app.push(id, body: message).status == 201)
            #expect(try await app.queueEntries().map(\.ciphertext) == [message])
            #expect(try await pending(app, id, secret).isEmpty)
        }
    }
}
