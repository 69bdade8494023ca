import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import IngressService

/// A body whose base64url form cannot fit APNs's 4 KB payload is delivered
/// without `c`, so the app shows the placeholder alert it registered.
@Suite struct OversizeBodyTests {
    @Test func aBodyPastFourKilobytesOfPayloadIsDeliveredWithoutCAndThePlaceholderIsIntact() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let app = try await App.register(stack, alert: ("Inbox", "You have new mail"))
            try await app.activate()
            let plaintext = Array(repeating: UInt8(ascii: "x"), count: 3_500)
            let sent = try await Parties.send(plaintext, to: app.endpoint, keys: app.keys)
            #expect(sent.status == 201)
            // 3,500 bytes of plaintext → 3,603 bytes of aes128gcm → 4,804 characters of base64url.
            #expect(sent.ciphertext.count == 3_603)
            #expect(Base64URL.encode(sent.ciphertext).utf8.count > 4_096)
            try await eventually("the notification at the simulator") { stack.recordings(token: app.token).count == 1 }
            let recorded = try #require(stack.recordings(token: app.token).first)
            #expect(
                String(decoding: recorded.payload, as: UTF8.self)
                    == #"{"aps":{"alert":{"title":"Inbox","body":"You have new mail"},"mutable-content":1}}"#)
        }
    }

    /// The longest placeholder registration accepts (200 characters of 4 bytes, 1000
    /// of 3) still fits APNs's 4096-byte payload: Apple takes it, without `c`.
    @Test func theLongestPlaceholderRegistrationAcceptsIsStillTakenByAPNs() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let title = String(repeating: "😀", count: 200)
            let body = String(repeating: "漢", count: 1000)
            let app = try await App.register(stack, alert: (title, body))
            try await app.activate()
            let sent = try await Parties.send(Parties.jmap("StateChange"), to: app.endpoint, keys: app.keys)
            #expect(sent.status == 201)
            try await eventually("the notification at the simulator") { stack.recordings(token: app.token).count == 1 }
            let payload = try #require(try app.delivered().first)
            let aps = try #require(payload["aps"] as? [String: Any])
            let alert = try #require(aps["alert"] as? [String: String])
            #expect(alert == ["title": title, "body": body])
            #expect(payload["c"] == nil)
        }
    }
}
