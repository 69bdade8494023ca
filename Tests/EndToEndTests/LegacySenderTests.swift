import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import IngressService

/// An older Stalwart posts the aes128gcm body as base64url text with
/// `Content-Type: application/json` and no `Content-Encoding`.
@Suite struct LegacySenderTests {
    @Test func aBase64URLTextBodyWithoutContentEncodingDeliversTheSameBytes() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let app = try await App.register(stack)
            try await app.activate()
            let change = Parties.jmap("StateChange")
            let sent = try await Parties.send(change, to: app.endpoint, keys: app.keys, legacy: true)
            #expect(sent.status == 201)
            try await eventually("the notification at the simulator") { stack.recordings(token: app.token).count == 1 }
            let payload = try #require(try app.delivered().first)
            #expect(payload["c"] as? String == Base64URL.encode(sent.ciphertext))
            #expect(try await app.decrypt(payload) == change)
        }
    }
}
