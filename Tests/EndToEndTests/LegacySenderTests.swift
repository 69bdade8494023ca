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

    /// Stalwart's push up to 2025 sends that text with `Content-Encoding: aes128gcm` as
    /// well (and padded): still the same bytes at Apple, not a 400 that it retries forever.
    @Test func anOlderStalwartsTextBodyWithContentEncodingDeliversTheSameBytes() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let app = try await App.register(stack)
            let verification = Parties.jmap("PushVerification")
            let stashed = try await Parties.send(verification, to: app.endpoint, keys: app.keys, form: .olderStalwart)
            #expect(stashed.status == 201, "\(stashed.text)")
            #expect(try await app.pending() == [Base64URL.encode(stashed.ciphertext)])
            try await app.activate()
            let change = Parties.jmap("StateChange")
            let sent = try await Parties.send(change, to: app.endpoint, keys: app.keys, form: .olderStalwart)
            #expect(sent.status == 201, "\(sent.text)")
            try await eventually("the notification at the simulator") { stack.recordings(token: app.token).count == 1 }
            let payload = try #require(try app.delivered().first)
            #expect(payload["c"] as? String == Base64URL.encode(sent.ciphertext))
            #expect(try await app.decrypt(payload) == change)
        }
    }
}
