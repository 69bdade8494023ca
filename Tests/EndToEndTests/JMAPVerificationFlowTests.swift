import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import IngressService

/// The spec's "Pending and verification", as a JMAP server (pywebpush) and an iOS app
/// (HTTP + http_ece) act it out against ingress + worker + APNs simulator.
@Suite struct JMAPVerificationFlowTests {
    @Test func verificationIsStashedDecryptedLocallyThenAStateChangeIsDeliveredAndDecryptsToTheExactBytes() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let app = try await App.register(stack)
            #expect(app.url == "https://push.example.test/api/push/p/\(app.id)")

            // The server verifies the new PushSubscription while it is pending: 201, stashed, not delivered.
            let verification = Parties.jmap("PushVerification")
            let stashed = try await Parties.send(verification, to: app.endpoint, keys: app.keys)
            #expect(stashed.status == 201)
            #expect(try await stack.streamLength() == 0)
            #expect(stack.recordings(token: app.token).isEmpty)

            // The app fetches the stash and decrypts the verification with its own private key.
            let pending = try await app.pending()
            #expect(pending == [Base64URL.encode(stashed.ciphertext)])
            #expect(try await Parties.decrypt(try #require(pending.first), keys: app.keys) == verification)
            try await app.activate()
            #expect(try await app.pending() == [])
            #expect(stack.recordings(token: app.token).isEmpty)

            // After activation, a StateChange becomes a notification whose `c` decrypts to the bytes sent.
            let change = Parties.jmap("StateChange")
            let sent = try await Parties.send(change, to: app.endpoint, keys: app.keys)
            #expect(sent.status == 201)
            try await eventually("the StateChange at the simulator") { stack.recordings(token: app.token).count == 1 }
            let delivered = try app.delivered()
            #expect(delivered.count == 1)
            let payload = try #require(delivered.first)
            #expect(payload["c"] as? String == Base64URL.encode(sent.ciphertext))
            #expect(try await app.decrypt(payload) == change)
            let aps = try #require(payload["aps"] as? [String: Any])
            #expect(aps["alert"] as? [String: String] == ["title": "Mail", "body": "New message"])
            #expect(aps["mutable-content"] as? Int == 1)
            // Only the StateChange was ever delivered: the verification never became a notification.
            try await eventually("the entry acknowledged") { try await stack.streamLength() == 0 }
            #expect(stack.recordings(token: app.token).count == 1)
        }
    }
}
