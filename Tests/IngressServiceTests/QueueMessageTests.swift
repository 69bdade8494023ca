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

    /// What the ingress enqueues is format 3, and holds what the push and the cache said.
    @Test func theHotPathWritesFormatThree() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres, plan: "enterprise")
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)
            let entry = try #require(try await app.redis.send("XRANGE", app.keys.stream, "-", "+").array?.last)
            let names = (entry.array?[1].array ?? []).enumerated().filter { $0.offset % 2 == 0 }.map(\.element.string)
            #expect(names == ["s", "m", "d"])
            let message = try #require(try await app.queueEntries().last)
            #expect(message.subscriptionID == id)
            #expect(message.accountID == fixture.accountID)
            #expect(message.credentialID == fixture.credentialID)
            #expect(message.quotaKey == app.keys.quota(account: fixture.accountID, month: RedisKeys.quotaMonth()))
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
