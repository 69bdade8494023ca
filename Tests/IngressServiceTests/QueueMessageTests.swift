import Shared
import Testing

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

    @Test func keysShareTheStreamsHashTag() {
        let keys = RedisKeys()
        #expect(keys.stream == "pushgate:queue:{0}")
        #expect(keys.subscription("abc") == "pushgate:{0}:sub:abc")
        #expect(keys.quota(account: "acct", month: "202501") == "pushgate:{0}:quota:acct:202501")
        #expect(RedisKeys(stream: "pushgate:queue:{7}").tombstone("x") == "pushgate:{7}:gone:x")
        #expect(RedisKeys.hashTag(of: "plain") == "{0}")
    }
}
