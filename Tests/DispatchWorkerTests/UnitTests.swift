import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// The worker's pure parts, without sockets.
@Suite struct NotificationBuilderTests {
    static func message(title: String = "Hi", body: String = "There", ciphertext: [UInt8] = [1, 2, 3]) -> QueueMessage {
        QueueMessage(
            messageID: "m", subscriptionID: "s", appID: "a", accountID: "acct", credentialID: "c", topic: "com.x",
            deviceToken: "ab", sandbox: false, alertTitle: title, alertBody: body, ciphertext: ciphertext, priority: 5,
            expiration: 0, collapseID: "k", acceptedAt: 0, quotaKey: "q")
    }

    /// `message`'s notification as the worker builds it (a batch of one).
    static func notification(for message: QueueMessage) -> APNsNotification {
        let delivery = Delivery(
            entry: PendingEntry(id: "1-0", context: StreamContext(keys: RedisKeys()), messageCount: 1),
            message: message)
        return NotificationBuilder.notifications(for: [delivery])[0]
    }

    static func payload(for message: QueueMessage) -> [UInt8] { notification(for: message).payload }

    @Test func thePayloadEscapesTheAlertAndCarriesTheCiphertextAsBase64URL() throws {
        let payload = Self.payload(
            for: Self.message(title: "Say \"hi\"\n", body: "a\\b\u{1}é", ciphertext: [0xFB, 0xFF]))
        let text = String(decoding: payload, as: UTF8.self)
        #expect(
            text == #"{"aps":{"alert":{"title":"Say \"hi\"\n","body":"a\\b\u0001é"},"mutable-content":1},"c":"-_8"}"#)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
        #expect(((object["aps"] as? [String: Any])?["alert"] as? [String: String])?["title"] == "Say \"hi\"\n")
    }

    @Test func anEmptyTitleIsLeftOut() {
        let payload = Self.payload(for: Self.message(title: "", body: "New notification", ciphertext: [1]))
        #expect(
            String(decoding: payload, as: UTF8.self)
                == #"{"aps":{"alert":{"body":"New notification"},"mutable-content":1},"c":"AQ"}"#)
    }

    @Test func alertsWithoutEscapesAreCopiedAsTheyAreAndEscapesAreFoundAnywhere() {
        func literal(_ text: String) -> String {
            var bytes: [UInt8] = []
            JSONString.append(text, to: &bytes)
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(literal("") == #""""#)
        #expect(literal("Grüße 👋 / <ok>") == #""Grüße 👋 / <ok>""#)
        #expect(literal("end\u{7F}") == #""end\u007f""#)
        #expect(literal("ends in a quote\"") == #""ends in a quote\"""#)
    }

    @Test func storedAlertBytesGiveTheLiteralTheirTextGives() {
        let samples: [[UInt8]] = [
            [], Array("plain ascii".utf8), Array("quote \" and \\".utf8), Array("Grüße 👋".utf8), [0x41, 0xFF, 0x42],
            [0x09, 0x7F],
        ]
        for bytes in samples {
            var fromBytes: [UInt8] = []
            JSONString.append(utf8: bytes[...], to: &fromBytes)
            var fromText: [UInt8] = []
            JSONString.append(String(decoding: bytes, as: UTF8.self), to: &fromText)
            #expect(fromBytes == fromText)
        }
    }

    @Test func cIsKeptUpTo4096BytesAndLeftOutBeyond() {
        // Without c, and its room: `,"c":""` takes 7 bytes; 3 bytes of ciphertext are 4 characters.
        let empty = Self.payload(for: Self.message(ciphertext: [])).count - 7
        let room = 4096 - empty - 7
        let fits = Self.message(ciphertext: Array(repeating: 7, count: room / 4 * 3))
        #expect(Self.payload(for: fits).count <= 4096)
        #expect(String(decoding: Self.payload(for: fits), as: UTF8.self).contains(#""c":"#))
        let tooBig = Self.message(ciphertext: Array(repeating: 7, count: room / 4 * 3 + 3))
        let payload = Self.payload(for: tooBig)
        #expect(payload.count == empty)
        #expect(!String(decoding: payload, as: UTF8.self).contains(#""c":"#))
    }

    @Test func headersComeFromTheMessage() {
        let notification = Self.notification(for: Self.message())
        #expect(notification.pushType == .alert)
        #expect(notification.priority.rawValue == 5)
        #expect(notification.expiration == .immediately)
        #expect(notification.collapseID == "k")
        #expect(notification.topic == "com.x")
    }

    @Test func aBatchsNotificationsKeepEachMessagesTopicAndToken() {
        let topics = ["com.example.one.app", "com.example.one.app", "com.example.two.app", "com.example.one.app"]
        let batch = topics.enumerated().map { index, topic in
            var message = Self.message()
            (message.topic, message.deviceToken) = (topic, String(repeating: "\(index)", count: 64))
            return Delivery(
                entry: PendingEntry(id: "\(index)-0", context: StreamContext(keys: RedisKeys()), messageCount: 1),
                message: message)
        }
        let notifications = NotificationBuilder.notifications(for: batch)
        #expect(notifications.map(\.topic) == topics)
        #expect(notifications.map(\.deviceToken) == (0..<4).map { String(repeating: "\($0)", count: 64) })
    }
}

@Suite struct QueueGaugesTests {
    /// The lag is measured against Redis's clock (`TIME`), the one entry ids carry.
    @Test func aTimeReplyIsReadAsUnixMilliseconds() async throws {
        let reply = RedisReply.array([.bulk(Array("1700000000".utf8)), .bulk(Array("123456".utf8))])
        #expect(QueueGauges.milliseconds(fromTime: reply) == 1_700_000_000_123)
        #expect(QueueGauges.milliseconds(fromTime: .null) == nil)
        let redis = try RedisClient(url: TestEnvironment.redisURL, options: .init(maximumConnections: 1))
        defer { redis.close() }
        let now = try #require(QueueGauges.milliseconds(fromTime: try await redis.send("TIME")))
        #expect(abs(now - Int64(Date().timeIntervalSince1970 * 1000)) < 5_000)
    }
}

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy(maxAttempts: 4, baseMilliseconds: 100, capMilliseconds: 1000)

    @Test func delaysDoubleWithEqualJitterUpToTheCap() {
        #expect(policy.delay(afterAttempts: 1, random: { 0 }) == 50)
        #expect(policy.delay(afterAttempts: 1, random: { 0.999 }) == 99)
        #expect(policy.delay(afterAttempts: 3, random: { 0 }) == 200)
        #expect(policy.delay(afterAttempts: 10, random: { 0 }) == 500)
        #expect(policy.delay(afterAttempts: 60, random: { 0.5 }) == 750)
    }

    @Test func itGivesUpAfterMaxAttemptsOrPastTheDeadline() {
        #expect(
            policy.decide(attempts: 1, nowMilliseconds: 0, deadlineMilliseconds: 10_000, random: { 0 })
                == .retry(afterMilliseconds: 50))
        #expect(policy.decide(attempts: 4, nowMilliseconds: 0, deadlineMilliseconds: 10_000) == .giveUp)
        #expect(policy.decide(attempts: 1, nowMilliseconds: 0, deadlineMilliseconds: 40, random: { 0 }) == .giveUp)
    }

    /// A message that could not be tried waits half its age (base to cap, jittered),
    /// however often it waited before, and until its deadline, not past it.
    @Test func aPostponedMessageWaitsHalfItsAgeUntilItsDeadline() {
        func postpone(age: Int64, atLeast: Int = 0, remaining: Int64 = 10_000, random: Double = 0)
            -> RetryPolicy.Decision
        {
            policy.postpone(
                ageMilliseconds: age, atLeastMilliseconds: atLeast, nowMilliseconds: 0,
                deadlineMilliseconds: remaining, random: { random })
        }
        #expect(postpone(age: 0) == .retry(afterMilliseconds: 50), "the base, jittered")
        #expect(postpone(age: 600) == .retry(afterMilliseconds: 150))
        #expect(postpone(age: 600, random: 0.999) == .retry(afterMilliseconds: 299))
        #expect(postpone(age: 3_600_000) == .retry(afterMilliseconds: 500), "the cap, jittered")
        #expect(
            postpone(age: 3_600_000, remaining: 120) == .retry(afterMilliseconds: 120), "a last look at the deadline")
        #expect(postpone(age: 3_600_000, remaining: 0) == .giveUp)
        // A busy destination's answer time as the least wait, jittered, under the cap.
        #expect(postpone(age: 0, atLeast: 300) == .retry(afterMilliseconds: 150))
        #expect(postpone(age: 0, atLeast: 300, random: 0.999) == .retry(afterMilliseconds: 299))
        #expect(postpone(age: 0, atLeast: 90_000) == .retry(afterMilliseconds: 500), "the cap")
    }

    /// A push may be sent for its whole TTL from the millisecond it was accepted,
    /// not only to the end of `expiration`'s whole second (probe 129 lost `TTL: 1`
    /// pushes accepted in a second's last milliseconds).
    @Test func theDeadlineIsTheAcceptancePlusTheTTLToTheMillisecond() {
        var message = NotificationBuilderTests.message()
        message.acceptedAt = 1_700_000_000_995
        message.expiration = 1_700_000_000 + 1  // TTL 1, as the ingress writes it
        #expect(OutcomeRecorder.deadline(of: message) == 1_700_000_001_995)
        message.expiration = 1_700_000_000 + 2_419_200
        #expect(OutcomeRecorder.deadline(of: message) == 1_700_000_000_995 + 2_419_200_000)
        message.expiration = 0  // TTL 0: now or never, within a grace
        #expect(OutcomeRecorder.deadline(of: message) == 1_700_000_000_995 + OutcomeRecorder.nowOrNeverMilliseconds)
        #expect(NotificationBuilderTests.notification(for: message).expiration == .immediately)
        message.expiration = 1_700_000_000 + 1
        #expect(
            NotificationBuilderTests.notification(for: message).expiration
                == .at(Date(timeIntervalSince1970: 1_700_000_001)), "APNs never keeps it past the TTL")
    }
}

@Suite struct DeliveryOutcomeTests {
    func response(_ status: Int, _ reason: APNsReason?) -> APNsResponse {
        APNsResponse(status: status, apnsID: nil, reason: reason)
    }

    @Test func answersMapToOutcomes() {
        let stamp = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(DeliveryOutcome.classify(response(200, nil)) == .sent)
        #expect(
            DeliveryOutcome.classify(response(410, .unregistered(timestamp: stamp)))
                == .gone(timestamp: stamp, reason: "Unregistered"))
        #expect(
            DeliveryOutcome.classify(response(400, .badDeviceToken)) == .gone(timestamp: nil, reason: "BadDeviceToken"))
        #expect(
            DeliveryOutcome.classify(response(403, .invalidProviderToken))
                == .credentialRejected(reason: "InvalidProviderToken"))
        // An environment the key is not for fails that message alone; the key stays.
        #expect(
            DeliveryOutcome.classify(response(403, .badEnvironmentKeyInToken))
                == .failed(.credentialRejected, detail: "BadEnvironmentKeyInToken"))
        #expect(
            DeliveryOutcome.classify(response(400, .deviceTokenNotForTopic))
                == .failed(.providerError, detail: "DeviceTokenNotForTopic"))
        #expect(
            DeliveryOutcome.classify(response(400, .topicDisallowed))
                == .failed(.providerError, detail: "TopicDisallowed"))
        #expect(
            DeliveryOutcome.classify(response(429, .tooManyRequests))
                == .retry(cause: "TooManyRequests", countsAgainstCircuit: false))
        #expect(
            DeliveryOutcome.classify(response(503, .serviceUnavailable))
                == .retry(cause: "ServiceUnavailable", countsAgainstCircuit: true))
        #expect(DeliveryOutcome.classify(response(502, nil)) == .retry(cause: "HTTP502", countsAgainstCircuit: true))
        #expect(
            DeliveryOutcome.classify(response(400, .unknown("NewThing"))) == .failed(.providerError, detail: "Unknown"))
    }

    @Test func clientErrorsMapToOutcomes() {
        #expect(DeliveryOutcome.classify(APNsClientError(.shutdown, "")) == .abandoned)
        #expect(
            DeliveryOutcome.classify(APNsClientError(.connection, ""))
                == .retry(cause: "connection", countsAgainstCircuit: true))
        #expect(
            DeliveryOutcome.classify(APNsClientError(.overloaded, ""))
                == .retry(cause: "overloaded", countsAgainstCircuit: false))
        #expect(
            DeliveryOutcome.classify(APNsClientError(.invalidRequest, ""))
                == .failed(.providerError, detail: "InvalidRequest"))
        // A key that cannot sign is the credential's fault; a token store (Redis) that
        // cannot be reached is ours, and the message waits for it.
        #expect(
            DeliveryOutcome.classify(APNsClientError(.providerToken, ""))
                == .failed(.credentialMissing, detail: "ProviderToken"))
        #expect(
            DeliveryOutcome.classify(APNsClientError(.providerTokenStore, ""))
                == .postponed(cause: "provider_token_store"))
    }
}

@Suite struct ReplyAndMessageTests {
    @Test func replyJSONIsTheDocumentedObject() {
        #expect(
            ReplyJSON.make(messageID: "abc", status: "failed", reason: "provider_error")
                == #"{"mid":"abc","status":"failed","reason":"provider_error"}"#)
    }

    @Test func replyKeyAndAttemptsRoundTripThroughTheStreamFields() throws {
        var message = NotificationBuilderTests.message()
        message.replyKey = RedisKeys(stream: "q:{7}").reply("req-1")
        message.attempts = 3
        #expect(message.replyKey == "pushgate:{7}:reply:req-1")
        #expect(try QueueMessage(fields: message.fields) == message)
        #expect(try QueueMessage(fields: NotificationBuilderTests.message().fields).attempts == 0)
    }

    @Test func dailyCountDaysAreUTC() {
        #expect(UTCDay.text(of: Date(timeIntervalSince1970: 1_700_000_000)) == "2023-11-14")
        #expect(DailyCounts.timestamp(Date(timeIntervalSince1970: 1_700_000_000.0421)) == "1700000000.042")
    }
}

@Suite struct EntryDecodingTests {
    static let message = QueueMessage(
        messageID: "m1", subscriptionID: "subscription-id-22char", appID: "app", accountID: "acct",
        credentialID: "cred", topic: "com.example.app", deviceToken: String(repeating: "ab", count: 32),
        sandbox: true, alertTitle: "New", alertBody: "Message", ciphertext: [0, 255, 13, 10, 0], priority: 10,
        expiration: 1_700_000_000, collapseID: "inbox", acceptedAt: 1_700_000_000_123,
        quotaKey: "pushgate:{0}:quota:acct:202511", replyKey: "pushgate:{0}:reply:r", attempts: 3)

    @Test func entriesReadIntoOneBufferDecodeToTheMessageWritten() throws {
        var variants = [Self.message]
        var plain = Self.message
        (plain.collapseID, plain.replyKey, plain.attempts, plain.sandbox, plain.expiration) = (nil, nil, 0, false, 0)
        variants.append(plain)
        var extreme = Self.message
        (extreme.expiration, extreme.acceptedAt) = (Int64.min, Int64.max)
        variants.append(extreme)
        for message in variants {
            let fields = StreamEntryFields(message.fields)
            #expect(fields.list == message.fields)
            #expect(try QueueMessage(entry: fields) == message)
        }
        // Unknown fields are ignored and the last of a repeated field wins.
        let extended = Self.message.fields + [Array("future".utf8), [1], Array("n".utf8), Array("5".utf8)]
        #expect(try QueueMessage(entry: StreamEntryFields(extended)).attempts == 5)
    }

    @Test func fieldNamesMatchOnlyExactlyAndReplyBytesAppendLikeArrays() throws {
        // Unknown names, one letter or sharing a known name's first bytes, are passed over.
        let noise = ["x", "", "vv", "mm", "ctx", "acc", "replyy"].flatMap { [Array($0.utf8), Array("junk".utf8)] }
        let fields = noise + Self.message.fields + noise
        var read = StreamEntryFields()
        for item in fields { item.withUnsafeBytes { read.append($0) } }
        #expect(read == StreamEntryFields(fields))
        #expect(try QueueMessage(entry: read) == Self.message)
    }

    @Test func format2KeepsEveryByteOfTheCiphertextAndTellsAbsentFromEmptyOptionals() throws {
        var message = Self.message
        message.ciphertext = (0..<4200).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        message.alertBody = String(repeating: "é", count: 300)
        message.collapseID = ""
        #expect(try QueueMessage(entry: StreamEntryFields(message.fields)) == message)
        message.collapseID = nil
        message.replyKey = ""
        #expect(try QueueMessage(entry: StreamEntryFields(message.fields)) == message)
        message.ciphertext = []
        #expect(try QueueMessage(entry: StreamEntryFields(message.fields)) == message)
    }

    @Test func aDecodedMessageReadsItsValuesInPlaceAndASetValueReplacesOnlyThatOne() throws {
        let decoded = try QueueMessage(entry: StreamEntryFields(Self.message.fields))
        #expect(Array(decoded.ciphertextBytes) == Self.message.ciphertext)
        #expect(String(decoding: decoded.alertTitleBytes, as: UTF8.self) == "New")
        #expect(String(decoding: decoded.alertBodyBytes, as: UTF8.self) == "Message")
        #expect(decoded.hasReplyKey)
        var changed = decoded
        changed.credentialID = "other"
        changed.replyKey = nil
        #expect(changed.credentialID == "other" && changed.replyKey == nil && !changed.hasReplyKey)
        #expect(changed.accountID == "acct" && changed.ciphertext == Self.message.ciphertext)
        #expect(decoded == Self.message && changed != decoded)
        #expect(decoded.hasSameCredential(as: Self.message) && !changed.hasSameCredential(as: decoded))
        var otherApp = Self.message
        #expect(otherApp.hasSameAccountAndApp(as: decoded))
        otherApp.appID = "app2"
        #expect(!otherApp.hasSameAccountAndApp(as: decoded))
    }

    @Test func format2IsSixFieldsAndTheMessagePartStartsWithTheCiphertext() throws {
        let fields = Self.message.fields
        let names = stride(from: 0, to: fields.count, by: 2).map { String(decoding: fields[$0], as: UTF8.self) }
        #expect(names == ["v", "s", "m", "acct", "cred", "qk", "n"])
        #expect(fields[1] == Array("2".utf8))
        // What the hot-path script stashes for a pending subscription: the first item.
        var reader = PackedFields.Reader(fields[5][...])
        #expect(reader.next().map(Array.init) == Self.message.ciphertext)
    }

    @Test func format1EntriesStillInFlightAreRead() throws {
        var plain = Self.message
        (plain.collapseID, plain.replyKey, plain.attempts) = (nil, nil, 0)
        for message in [Self.message, plain] {
            #expect(message.legacyFields.first(where: { $0 == Array("mid".utf8) }) != nil)
            #expect(try QueueMessage(entry: StreamEntryFields(message.legacyFields)) == message)
        }
    }

    @Test func packedFieldsRoundTripLongItemsAndOptionals() {
        var packed = PackedFields()
        let long = [UInt8](repeating: 0x80, count: 20_000)
        packed.append(long)
        packed.append([])
        packed.appendOptional(nil)
        packed.appendOptional("")
        packed.appendOptional("x")
        var reader = PackedFields.Reader(packed.bytes[...])
        #expect(reader.next().map(Array.init) == long)
        #expect(reader.next()?.isEmpty == true)
        #expect(reader.nextOptional().map { $0 == nil } == true)
        #expect(reader.nextOptional().map { $0.map(Array.init) } == .some([]))
        #expect(reader.nextOptional().map { $0.map(Array.init) } == .some(Array("x".utf8)))
        #expect(reader.isAtEnd)
        #expect(reader.next() == nil)
        var truncated = PackedFields.Reader(packed.bytes.prefix(100))
        #expect(truncated.next() == nil)
        var cutInLength = PackedFields.Reader(packed.bytes.prefix(1))
        #expect(cutInLength.next() == nil)
    }

    @Test func anUnreadableEntryNamesItsField() throws {
        func problem(_ fields: [[UInt8]]) -> QueueMessageError? {
            do {
                _ = try QueueMessage(entry: StreamEntryFields(fields))
                return nil
            } catch {
                return error
            }
        }
        func without(_ name: String, in fields: [[UInt8]]) -> [[UInt8]] {
            let index = fields.firstIndex(of: Array(name.utf8))!
            return Array(fields[..<index] + fields[(index + 2)...])
        }
        for fields in [Self.message.fields, Self.message.legacyFields] {
            #expect(problem(without("qk", in: fields)) == QueueMessageError(field: "qk", problem: "is missing"))
            var otherVersion = fields
            otherVersion[1] = Array("3".utf8)
            #expect(problem(otherVersion) == QueueMessageError(field: "v", problem: "is not a known format version"))
        }
        var truncated = Self.message.fields
        truncated[5].removeLast()
        #expect(problem(truncated) == QueueMessageError(field: "m", problem: "is truncated"))
        #expect(problem(without("m", in: Self.message.fields)) == QueueMessageError(field: "m", problem: "is missing"))
        var notANumber = Self.message.legacyFields
        let prio = try #require(notANumber.firstIndex(of: Array("prio".utf8)))
        notANumber[prio + 1] = Array("ten".utf8)
        #expect(problem(notANumber) == QueueMessageError(field: "prio", problem: "is not an integer"))
        notANumber[prio + 1] = Array("99999999999999999999".utf8)
        #expect(problem(notANumber) == QueueMessageError(field: "prio", problem: "is not an integer"))
    }
}

/// An entry's messages settle one by one; the entry completes once, with all of them.
@Suite struct PendingEntryTests {
    static func deliveries(_ count: Int) -> (PendingEntry, [Delivery]) {
        let entry = PendingEntry(id: "1-0", context: StreamContext(keys: RedisKeys()), messageCount: count)
        return (entry, (0..<count).map { _ in Delivery(entry: entry, message: NotificationBuilderTests.message()) })
    }

    static func item(_ delivery: Delivery, _ tally: DailyCounts.Kind?) -> Acknowledgement.Item {
        Acknowledgement.Item(
            delivery: delivery, tally: tally, releaseQuota: tally == .failed, replyJSON: nil,
            retry: tally == nil ? Acknowledgement.Retry(delayMilliseconds: 100, attempts: 1, cause: "x") : nil)
    }

    @Test func theLastSettlementCompletesTheEntryWithEveryOutcome() {
        let (entry, deliveries) = Self.deliveries(3)
        #expect(entry.settle(Self.item(deliveries[2], .sent)) == nil)
        #expect(entry.settle(Self.item(deliveries[0], nil)) == nil)
        let items = entry.settle(Self.item(deliveries[1], .failed)) ?? []
        #expect(items.map(\.tally) == [.sent, nil, .failed])
        #expect(items.map { $0.delivery === deliveries[2] } == [true, false, false])
        #expect(Acknowledgement(entry: entry, items: items).isPlain == false)
        #expect(Acknowledgement(entry: entry, items: [items[0]]).isPlain)
    }
}

/// An acknowledgement's counters: numbered from 1 as first met, one per account, app
/// and kind, each plain entry's counts as (number, messages) records by run.
@Suite struct BatchCountersTests {
    static func item(app: String, _ tally: DailyCounts.Kind?) -> Acknowledgement.Item {
        var message = NotificationBuilderTests.message()
        message.appID = app
        let delivery = Delivery(
            entry: PendingEntry(id: "1-0", context: StreamContext(keys: RedisKeys()), messageCount: 1), message: message
        )
        return PendingEntryTests.item(delivery, tally)
    }

    /// Big-endian 32-bit pairs, as the script reads them.
    static func records(_ bytes: ArraySlice<UInt8>) -> [[UInt32]] {
        stride(from: bytes.startIndex, to: bytes.endIndex, by: 8).map { start in
            [0, 4].map { offset in bytes[(start + offset)..<(start + offset + 4)].reduce(0) { $0 << 8 | UInt32($1) } }
        }
    }

    @Test func countersAreNumberedOncePerAccountAppAndKind() {
        var counters = BatchCounters(day: "2026-12-01")
        counters.addPlain([Self.item(app: "a", .sent), Self.item(app: "a", .sent), Self.item(app: "b", .sent)])
        counters.addPlain([Self.item(app: "b", .sent), Self.item(app: "a", .sent)])
        #expect(counters.number(of: Self.item(app: "a", .failed)) == 3)
        #expect(counters.number(of: Self.item(app: "b", .sent)) == 2)
        #expect(counters.number(of: Self.item(app: "a", nil)) == 0, "a retry counts nothing")
        #expect(counters.number(of: Self.item(app: "a", .failed)) == 3)

        #expect(Self.records(counters.plainRecords(0)) == [[1, 2], [2, 1]])
        #expect(Self.records(counters.plainRecords(1)) == [[2, 1], [1, 1]])
        let named = counters.fields.compactMap(CounterField.counter)
        #expect(named.map(\.key.app) == ["a", "b", "a"])
        #expect(named.map(\.kind) == [.sent, .sent, .failed])
        #expect(named.allSatisfy { $0.key.account == "acct" && $0.key.day == "2026-12-01" })
        #expect(CounterField.counter(Array("#id".utf8)) == nil, "bookkeeping names no counter")
    }
}

/// Permits are messages; a read that brought more than it took takes the rest.
@Suite struct InFlightLimiterTests {
    @Test func takingPastTheLimitHoldsReadersUntilEnoughComeBack() async {
        let limiter = InFlightLimiter(limit: 10)
        #expect(await limiter.acquire(upTo: 10) == 10)
        limiter.finishRead(granted: 10, messages: 15)
        #expect(limiter.inFlight == 15)
        let waiter = Task { await limiter.acquire(upTo: 4, atLeast: 2) }
        limiter.release(6)
        #expect(limiter.inFlight == 9)
        limiter.release(1)
        #expect(await waiter.value == 2)
        #expect(limiter.inFlight == 10)
    }

    /// The permits a read holds while it waits (a blocking read of an empty queue
    /// holds a batch's worth) are not messages: the in-flight gauge reads 0 when idle.
    @Test func permitsOfAReadInProgressAreNotMessagesInFlight() async {
        let limiter = InFlightLimiter(limit: 10)
        #expect(await limiter.acquire(upTo: 8) == 8)
        #expect(limiter.inFlight == 8)
        #expect(limiter.messagesInFlight == 0)
        limiter.finishRead(granted: 8, messages: 3)
        #expect(limiter.inFlight == 3)
        #expect(limiter.messagesInFlight == 3)
        let reader = Task { await limiter.acquire(upTo: 7) }
        #expect(await reader.value == 7)
        #expect(limiter.messagesInFlight == 3)
        limiter.abandonRead(7)
        limiter.release(3)
        #expect(limiter.inFlight == 0)
        #expect(limiter.messagesInFlight == 0)
    }

    /// The reader gives every permit back after an empty read and asks again at once:
    /// the claimer waiting meanwhile must get them, or it could wait for ever.
    @Test func permitsGivenBackGoToWhoWaitsNotToWhoAsksNext() async throws {
        let limiter = InFlightLimiter(limit: 4)
        #expect(await limiter.acquire(upTo: 4) == 4)
        let claimer = Task { await limiter.acquire(upTo: 4) }
        #expect(try await Poll.until(timeout: .seconds(5)) { limiter.waiting == 1 })
        limiter.release(4)
        #expect(limiter.inFlight == 4)  // handed over, not left for the taking
        let reader = Task { await limiter.acquire(upTo: 4, atLeast: 1) }
        #expect(await claimer.value == 4)
        #expect(try await Poll.until(timeout: .seconds(5)) { limiter.waiting == 1 })
        limiter.release(4)
        #expect(await reader.value == 4)
        limiter.close()
    }
}

@Suite struct ReadLingerTests {
    /// The reader waits before its next read only under load: a read of at least half
    /// a hot-path run that left permits unused. Light load (a push per run) and a read
    /// that took all it could (a backlog) are followed at once.
    @Test func onlyABusyStreamThatWasEmptiedMakesTheReaderLinger() {
        let run = HotPathScript.maximumBatch
        #expect(QueueConsumer.lingers(afterReading: 2 * run, of: 256))
        #expect(QueueConsumer.lingers(afterReading: run / 2, of: 256))
        #expect(!QueueConsumer.lingers(afterReading: 1, of: 256), "a lone push is read at once")
        #expect(!QueueConsumer.lingers(afterReading: run / 2 - 1, of: 256))
        #expect(!QueueConsumer.lingers(afterReading: 250, of: 256), "a backlog is read at once")
        #expect(!QueueConsumer.lingers(afterReading: 0, of: 256), "an empty read blocked already")
    }
}

/// When a topic's mark replaces a message (`TopicSupersession.replaces`).
@Suite struct TopicMarkTests {
    @Test func aMarkReplacesOnlyAnotherMessageAcceptedNoEarlier() {
        var message = NotificationBuilderTests.message()
        message.messageID = "own"
        message.acceptedAt = 1_000
        #expect(TopicSupersession.replaces("newer:1001", message))
        #expect(TopicSupersession.replaces("same-ms:1000", message))  // queued after it: Redis's order
        #expect(!TopicSupersession.replaces("own:1000", message))
        // An older message's mark: this one was queued without one (an ingress of an
        // older version, or a failed write), and it is the newer.
        #expect(!TopicSupersession.replaces("older:999", message))
        #expect(!TopicSupersession.replaces("", message))
        #expect(!TopicSupersession.replaces("garbled", message))
    }
}

/// One message of a (subscription, topic) at a time on its way to APNs (`TopicGate`).
@Suite struct TopicGateTests {
    static func delivery(
        _ id: String, subscription: String = "s", topic: String? = "t", acceptedAt: Int64 = 0
    ) -> Delivery {
        var message = NotificationBuilderTests.message()
        message.messageID = id
        message.subscriptionID = subscription
        message.collapseID = topic
        message.acceptedAt = acceptedAt
        return Delivery(
            entry: PendingEntry(id: "1-0", context: StreamContext(keys: RedisKeys()), messageCount: 1),
            message: message)
    }

    static func ids(_ deliveries: [Delivery]) -> [String] { deliveries.map(\.message.messageID) }

    @Test func aTopicsNextMessageWaitsForTheOneInFlightAndOnlyTheNewestWaits() {
        let gate = TopicGate()
        let (a1, plain) = (Self.delivery("a1"), Self.delivery("plain", topic: nil))
        let other = Self.delivery("o", subscription: "x")
        var admitted = gate.admit([a1, plain, other])
        #expect(Self.ids(admitted.send) == ["a1", "plain", "o"])
        let (a2, a3) = (Self.delivery("a2"), Self.delivery("a3"))
        admitted = gate.admit([a2])
        #expect(admitted.send.isEmpty && admitted.replaced.isEmpty)
        admitted = gate.admit([a3])
        #expect(admitted.send.isEmpty)
        #expect(Self.ids(admitted.replaced) == ["a2"])
        #expect(gate.finished(plain) == nil)
        #expect(gate.finished(a1)?.message.messageID == "a3")  // now in flight
        let a4 = Self.delivery("a4")
        #expect(gate.admit([a4]).send.isEmpty)
        #expect(gate.finished(a3)?.message.messageID == "a4")
        #expect(gate.finished(a4) == nil)
        #expect(Self.ids(gate.admit([Self.delivery("a5")]).send) == ["a5"])  // nothing in flight: at once
        #expect(gate.finished(other) == nil)
    }

    /// Newest is by acceptance, not by arrival at the gate; a copy of a message already
    /// here goes past it (as without the gate), and its answer releases nothing.
    @Test func theNewestByAcceptanceWaitsAndCopiesPassThrough() {
        let gate = TopicGate()
        let b1 = Self.delivery("b1", acceptedAt: 10)
        let b2 = Self.delivery("b2", acceptedAt: 20)
        let b3 = Self.delivery("b3", acceptedAt: 30)
        var admitted = gate.admit([b1, b3, b2])  // b2 read after b3 (a retry, say)
        #expect(Self.ids(admitted.send) == ["b1"])
        #expect(Self.ids(admitted.replaced) == ["b2"])  // older than b3, waiting
        admitted = gate.admit([Self.delivery("b0", acceptedAt: 5)])
        #expect(Self.ids(admitted.replaced) == ["b0"])  // older than b1, on its way
        let copy = Self.delivery("b3", acceptedAt: 30)  // the same message claimed again
        admitted = gate.admit([copy])
        #expect(Self.ids(admitted.send) == ["b3"])
        #expect(admitted.replaced.isEmpty)
        #expect(gate.finished(copy) == nil)  // releases nothing
        #expect(gate.finished(Self.delivery("b1", acceptedAt: 10)) == nil)  // not the one let go
        #expect(gate.finished(b1) === b3)
        #expect(gate.finished(b3) == nil)
    }
}

@Suite struct KnownOutcomeTests {
    @Test func goneAndRejectedAnswersSurviveTheirText() throws {
        let stamped = DeliveryOutcome.gone(
            timestamp: Date(timeIntervalSince1970: 1_700_000_000.123), reason: "Unregistered")
        for outcome in [
            stamped, .gone(timestamp: nil, reason: "BadDeviceToken"),
            .credentialRejected(reason: "InvalidProviderToken"),
        ] {
            let text = try #require(KnownOutcome.text(of: outcome))
            #expect(KnownOutcome.outcome(of: text) == outcome, "\(text)")
        }
    }

    @Test func otherOutcomesAndUnknownTextAreNotCarried() {
        #expect(KnownOutcome.text(of: .sent) == nil)
        #expect(KnownOutcome.text(of: .retry(cause: "timeout", countsAgainstCircuit: true)) == nil)
        for text in ["", "gone", "gone  -", "gone Unregistered soon", "credential_rejected", "sent", "gone a b c"] {
            #expect(KnownOutcome.outcome(of: text) == nil, "\(text)")
        }
    }
}
