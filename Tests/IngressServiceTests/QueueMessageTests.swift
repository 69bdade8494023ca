import TestSupport
import Testing

@testable import IngressService
@testable import Shared

@Suite struct QueueMessageTests {
    @Test func fieldsRoundTripBinarySafely() throws {
        let message = QueueMessage(
            messageID: "m", subscriptionID: "s", appID: "a", accountID: "c", credentialID: "k", topic: "com.x",
            deviceToken: "ab", sandbox: true, alertTitle: "T", alertBody: "B", ciphertext: [0, 255, 13, 10, 0],
            priority: 5, expiration: 123, collapseID: nil, acceptedAt: 456, quotaKey: "q")
        #expect(try QueueMessage(fields: message.fields) == message)
        var withCollapse = message
        withCollapse.collapseID = "inbox"
        #expect(try QueueMessage(fields: withCollapse.fields) == withCollapse)
        #expect(throws: QueueMessageError.self) { try QueueMessage(fields: Array(message.fields.dropLast(2))) }
        var retried = message
        retried.attempts = 2
        retried.knownOutcome = "gone Unregistered 1700000000000"
        let read = try QueueMessage(fields: retried.fields)
        #expect(read == retried)
        #expect(read.knownOutcome == "gone Unregistered 1700000000000")
        #expect(try QueueMessage(fields: message.fields).knownOutcome == nil)
    }

    /// Format 3 (the hot-path script's): `s`, `m` and the packed decision part `d`, no
    /// `v`; read like format 2, a length of 128 or more included.
    @Test func formatThreeReadsLikeFormatTwo() throws {
        let message = QueueMessage(
            messageID: "m", subscriptionID: "s", appID: "a", accountID: "c", credentialID: "k", topic: "com.x",
            deviceToken: "ab", sandbox: false, alertTitle: "T", alertBody: "B", ciphertext: [0, 255, 13, 10, 0],
            priority: 10, expiration: 0, collapseID: "inbox", acceptedAt: 456,
            quotaKey: String(repeating: "q", count: 300), replyKey: "r")
        let decision = QueueMessage.decisionPart(
            accountID: message.accountID, credentialID: message.credentialID, quotaKey: message.quotaKey)
        #expect(decision.prefix(4) == [1, UInt8(ascii: "c"), 1, UInt8(ascii: "k")])
        #expect(decision[4...5] == [0xac, 0x02])
        let format2 = message.fields
        let format3 = [Array("s".utf8), format2[3], Array("m".utf8), format2[5], Array("d".utf8), decision]
        #expect(try QueueMessage(fields: format3) == message)
        #expect(try QueueMessage(fields: format3 + [Array("n".utf8), Array("2".utf8)]).attempts == 2)
        #expect(throws: QueueMessageError(field: "d", problem: "is truncated")) {
            try QueueMessage(fields: Array(format3.dropLast()) + [Array(decision.prefix(4))])
        }
        // Without `d` (and `v`), no format.
        #expect(throws: QueueMessageError(field: "v", problem: "is missing")) {
            try QueueMessage(fields: Array(format3.dropLast(2)))
        }
    }

    /// Format 4: `v` `4`, then `s`, `m`, `d` per message; every format reads through
    /// `messages(in:)`, the older ones as one message.
    @Test func formatFourHoldsEachMessageInOrder() throws {
        let messages = (0..<3).map { (index: Int) -> QueueMessage in
            let ciphertext: [UInt8] = [UInt8(index), 255, 13, 10, 0]
            return QueueMessage(
                messageID: "m\(index)", subscriptionID: "s\(index)", appID: "a", accountID: "c\(index % 2)",
                credentialID: "k", topic: "com.x", deviceToken: "ab", sandbox: index == 1, alertTitle: "T",
                alertBody: "B", ciphertext: ciphertext, priority: 10, expiration: 0,
                collapseID: index == 2 ? "inbox" : nil, acceptedAt: 456, quotaKey: "q\(index)",
                replyKey: index == 0 ? "r" : nil)
        }
        let fields = QueueMessage.batchFields(messages)
        #expect(fields.count == 2 + 6 * 3)
        #expect(try QueueMessage.messages(in: StreamEntryFields(fields)) == messages)
        #expect(try QueueMessage.messages(in: StreamEntryFields(messages[1].fields)) == [messages[1]])
        // A worker that reads only formats 1–3 dead-letters it rather than send one of its messages.
        #expect(throws: QueueMessageError(field: "v", problem: "is not a known format version")) {
            try QueueMessage(fields: fields)
        }
        let malformed = QueueMessageError(field: "v", problem: "4 is not followed by s, m and d per message")
        #expect(throws: malformed) { try QueueMessage.messages(in: StreamEntryFields(Array(fields.prefix(2)))) }
        #expect(throws: malformed) { try QueueMessage.messages(in: StreamEntryFields(Array(fields.dropLast(2)))) }
        var swapped = fields
        swapped.swapAt(2, 4)
        #expect(throws: malformed) { try QueueMessage.messages(in: StreamEntryFields(swapped)) }
        #expect(throws: QueueMessageError(field: "d", problem: "is truncated")) {
            let truncated: [UInt8] = [1, UInt8(ascii: "c")]
            return try QueueMessage.messages(in: StreamEntryFields(Array(fields.dropLast()) + [truncated]))
        }
    }

    /// What the ingress enqueues is format 4, and holds what the push and the cache said.
    @Test func theHotPathWritesFormatFour() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres, plan: "enterprise")
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)
            let entry = try #require(try await app.redis.send("XRANGE", app.keys.stream, "-", "+").array?.last)
            let items = entry.array?[1].array ?? []
            let names = items.enumerated().filter { $0.offset % 2 == 0 }.map(\.element.string)
            #expect(names == ["v", "s", "m", "d"])
            #expect(items[1].string == "4")
            let message = try #require(try await app.queueEntries().last)
            #expect(message.subscriptionID == id)
            #expect(message.accountID == fixture.accountID)
            #expect(message.credentialID == fixture.credentialID)
            #expect(message.quotaKey == app.keys.quota(account: fixture.accountID, month: RedisKeys.quotaMonth()))
        }
    }

    /// The pushes one script run queues share one entry, in their order; the others
    /// keep their own answers.
    @Test func aRunsQueuedPushesShareOneEntry() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres, plan: "enterprise")
            var ids: [String] = []
            for _ in 0..<3 {
                let (id, _) = try await app.subscribe(topic: fixture.topic)
                #expect(try await app.push(id).status == 201)  // fills the cache
                ids.append(id)
            }
            let before = try await app.queueLength()
            let requests = (ids + ["unknownSubscriptionId0"]).enumerated().map { index, id in
                HotPathScript.Request(
                    subscriptionID: id, scope: .push, rateLimit: 120, rateWindowMilliseconds: 60_000, stashLimit: 5,
                    stashLifetimeMilliseconds: 1_800_000, quotaMonth: RedisKeys.quotaMonth(),
                    messageID: "message\(index)", ciphertext: [UInt8(index)], priority: 10, expiration: 0,
                    collapseID: nil, acceptedAt: 1)
            }
            _ = try await app.redis.send("HSET", app.keys.subscription("unknownSubscriptionId0"), "missing", "1")
            let arguments: [any RedisValueConvertible] =
                [app.keys.prefix, 120, 60_000, 5, 1_800_000, RedisKeys.quotaMonth(), 86_400, "0"]
                + requests.flatMap { [$0.mode, $0.subscriptionID, $0.messagePart] as [any RedisValueConvertible] }
            let reply = try await app.redis.run(HotPathScript.script, keys: [app.keys.stream], arguments: arguments)
            let decisions = try (reply.array ?? []).map(HotPathScript.decision(from:))
            guard decisions.count == 4, case .queued(let entryID) = decisions[0] else {
                Issue.record("unexpected decisions \(decisions)")
                return
            }
            #expect(decisions[1] == .queued(entryID: entryID) && decisions[2] == .queued(entryID: entryID))
            #expect(decisions[3] == .notFound)
            let queued = try await app.queueEntries()
            #expect(queued.count == before + 3)
            #expect(queued.suffix(3).map(\.messageID) == ["message0", "message1", "message2"])
            #expect(queued.suffix(3).map(\.subscriptionID) == ids)
            let last = try await app.redis.send("XREVRANGE", app.keys.stream, "+", "-", "COUNT", 1)
            #expect(last.array?.first?.array?.first?.string == entryID)
        }
    }

    /// Should the run's one `XADD` fail, none of its pushes is queued or reserved:
    /// they answer a storage failure, never a 201.
    @Test func aQueueThatCannotBeWrittenFailsThePushesAndReservesNothing() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)
            let quotaKey = app.keys.quota(account: fixture.accountID, month: RedisKeys.quotaMonth())
            let reserved = try await app.redis.send("GET", quotaKey).string
            #expect(reserved == "1")
            _ = try await app.redis.send("DEL", app.keys.stream)
            _ = try await app.redis.send("SET", app.keys.stream, "not a stream")
            let refused = try await app.push(id)
            #expect(refused.status >= 500)
            #expect(String(decoding: refused.body, as: UTF8.self).contains("1005"))
            #expect(try await app.redis.send("GET", quotaKey).string == reserved)
            _ = try await app.redis.send("DEL", app.keys.stream)
            #expect(try await app.push(id).status == 201)
            #expect(try await app.redis.send("GET", quotaKey).string == "2")
        }
    }

    @Test func keysShareTheStreamsHashTag() {
        let keys = RedisKeys()
        #expect(keys.stream == "pushgate:queue:{0}")
        #expect(keys.subscription("abc") == "pushgate:{0}:sub:abc")
        #expect(keys.quota(account: "acct", month: "202501") == "pushgate:{0}:quota:acct:202501")
        #expect(RedisKeys(stream: "pushgate:queue:{7}").tombstone("x") == "pushgate:{7}:gone:x")
        #expect(RedisKeys.hashTag(of: "plain") == "{0}")
    }
}
