import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import IngressService

/// The app is uninstalled: Apple answers 410 Unregistered, and the sender's next
/// push answers 410 so it stops using the URL.
@Suite struct UninstalledDeviceTests {
    @Test func aDeviceUninstalledAtAppleAnswersTheSendersNextPushWith410() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let app = try await App.register(stack)
            try await app.activate()
            try await stack.controlRequest("POST", "/devices/\(app.token)/uninstall")

            let first = try await Parties.send(Parties.jmap("StateChange"), to: app.endpoint, keys: app.keys)
            #expect(first.status == 201)
            try await eventually("the subscription deleted") { try await !stack.subscriptionExists(app.id) }
            let next = try await Parties.send(Parties.jmap("StateChange"), to: app.endpoint, keys: app.keys)
            #expect(next.status == 410)
            let error = try JSONSerialization.jsonObject(with: Data(next.text.utf8)) as? [String: String]
            #expect(error == ["error": "1003 Subscription not found"])
            // It stays gone for a sender that retries anyway; Apple was asked once and never delivered.
            #expect(try await Parties.send(Parties.jmap("StateChange"), to: app.endpoint, keys: app.keys).status == 410)
            #expect(stack.recordings(token: app.token).isEmpty)
            try await eventually("the daily count") { try await stack.dailyCounts().gone == 1 }
            let stats = try await stack.controlRequest("GET", "/stats")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
            #expect((json["rejected"] as? [String: Int])?["Unregistered"] == 1, "APNs asked once: \(stats.text)")
            #expect(try await stack.dailyCounts().gone == 1)
        }
    }
}
