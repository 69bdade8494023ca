import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import DispatchWorker

/// Web Push in at the ingress → exactly the right APNs request at the simulator.
@Suite struct WebPushToAPNsTests {
    static func headers(_ recorded: RecordedNotification) -> [String: String] {
        Dictionary(recorded.headers.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    @Test func aWebPushBecomesExactlyTheRightAPNsRequestAndIsCountedAsSent() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            let body = Fixture.message(recordLength: 200)
            let response = try await stack.push(
                id, body: body, headers: [("TTL", "3600"), ("Content-Encoding", "aes128gcm")])
            #expect(response.status == 201)
            try await eventually("the notification at the simulator") { stack.recordings(token: token).count == 1 }
            let recorded = try #require(stack.recordings(token: token).first)
            let entryTime = Int64(Date().timeIntervalSince1970)
            let headers = Self.headers(recorded)
            #expect(headers[":method"] == "POST")
            #expect(headers[":scheme"] == "https")
            #expect(headers[":authority"] == "localhost:\(stack.simulator.listenAddress.port)")
            #expect(headers[":path"] == "/3/device/\(token)")
            #expect(headers["apns-topic"] == stack.fixture.topic)
            #expect(headers["apns-push-type"] == "alert")
            #expect(headers["apns-priority"] == "10")
            let expiration = try #require(Int64(headers["apns-expiration"] ?? ""))
            #expect(abs(expiration - (entryTime + 3600)) <= 5)
            #expect(headers["apns-collapse-id"] == nil)
            #expect(
                Set(headers.keys) == [
                    ":method", ":scheme", ":authority", ":path", "apns-topic", "apns-push-type", "apns-priority",
                    "apns-expiration",
                ])
            #expect(recorded.teamID == stack.teamID)
            #expect(recorded.keyID == stack.keyID)
            let expected =
                #"{"aps":{"alert":{"body":"New notification"},"mutable-content":1},"c":""#
                + Base64URL.encode(body) + #""}"#
            #expect(String(decoding: recorded.payload, as: UTF8.self) == expected)

            // Outcome: acknowledged and deleted, quota kept, counted, last push set.
            try await eventually("the entry acknowledged") {
                let length = try await stack.streamLength()
                let pending = try await stack.pendingCount()
                return length == 0 && pending == 0
            }
            #expect(try await stack.quota() == 1)
            try await eventually("the daily count") { try await stack.dailyCounts().sent == 1 }
            // Written with the same tick as the counts' transfer, just after it.
            try await eventually("the last push recorded") {
                let lastPush = try await stack.postgres.query(
                    "SELECT last_push_at FROM subscriptions WHERE id = \(id)")
                return try lastPush.first?.decode("last_push_at", as: Date?.self) != nil
            }
        }
    }

    @Test func sandboxSubscriptionsGoToTheSandboxHost() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe(sandbox: true)
            #expect(try await stack.push(id).status == 201)
            try await eventually("the notification") { stack.recordings(token: token).count == 1 }
            let headers = Self.headers(try #require(stack.recordings(token: token).first))
            #expect(headers[":authority"] == "127.0.0.1:\(stack.simulator.listenAddress.port)")
        }
    }

    @Test func urgencyLowIsPriority5TTLZeroIsExpiration0AndTopicIsTheCollapseID() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            let response = try await stack.push(
                id,
                headers: [("TTL", "0"), ("Content-Encoding", "aes128gcm"), ("Urgency", "low"), ("Topic", "inbox-7")])
            #expect(response.status == 201)
            try await eventually("the notification") { stack.recordings(token: token).count == 1 }
            let headers = Self.headers(try #require(stack.recordings(token: token).first))
            #expect(headers["apns-priority"] == "5")
            #expect(headers["apns-expiration"] == "0")
            #expect(headers["apns-collapse-id"] == "inbox-7")
        }
    }

    @Test func aFourKilobyteBodyIsSentWithoutCSoTheAppShowsThePlaceholder() async throws {
        try await DeliveryStack.with { stack in
            let worker = try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            #expect(worker.metrics.ciphertextOmitted.value() == 0)
            // 4,096 bytes of ciphertext are 5,462 in base64url: past APNs's 4,096.
            let body = Fixture.message(recordLength: 4096 - 86)
            #expect(try await stack.push(id, body: body).status == 201)
            try await eventually("the notification") { stack.recordings(token: token).count == 1 }
            let recorded = try #require(stack.recordings(token: token).first)
            #expect(
                String(decoding: recorded.payload, as: UTF8.self)
                    == #"{"aps":{"alert":{"body":"New notification"},"mutable-content":1}}"#)
            // Counted, so an operator sees a sender whose pushes never reach the app's extension.
            try await eventually("settled") { try await stack.isDrained() }
            #expect(worker.metrics.ciphertextOmitted.value() == 1)

            // Once per notification delivered, not per attempt.
            try await stack.controlRequest("POST", "/faults", #"{"status":503,"count":1}"#)
            #expect(try await stack.push(id, body: body).status == 201)
            try await eventually("the retried notification") { stack.recordings(token: token).count == 2 }
            try await eventually("settled") { try await stack.isDrained() }
            #expect(worker.metrics.retries.value("ServiceUnavailable") == 1)
            #expect(worker.metrics.ciphertextOmitted.value() == 2)
        }
    }
}
