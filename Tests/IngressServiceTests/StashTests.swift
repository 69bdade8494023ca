import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

@Suite struct StashTests {
    func pending(_ app: IngressTestApp, _ id: String, _ secret: String) async throws -> [String] {
        let response = try await app.request(
            "GET", "/api/push/v1/subscriptions/\(id)/pending", headers: [("Authorization", "Bearer \(secret)")])
        try #require(response.status == 200)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: [String]])
        return try #require(object["messages"])
    }

    @Test func sixPushesWhilePendingKeepTheFiveNewestInOrderAndNothingIsQueued() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            var sent: [[UInt8]] = []
            for _ in 0..<6 {
                let message = Fixture.message()
                sent.append(message)
                let response = try await app.push(id, body: message)
                #expect(response.status == 201)
                #expect(response.headers["location"] != nil)
                #expect(response.headers["ttl"] == "60")
            }
            #expect(try await pending(app, id, secret) == sent.suffix(5).map(Base64URL.encode))
            #expect(try await app.queueLength() == 0)
            #expect(app.app.metrics.pushes.value("stashed", "") == 6)
        }
    }

    @Test func stashedMessagesExpireAfterTheConfiguredLifetime() async throws {
        try await IngressTestApp.with(["STASH_TTL_SECONDS": "1"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            #expect(try await app.push(id).status == 201)
            #expect(try await pending(app, id, secret).count == 1)
            try await Task.sleep(for: .milliseconds(1300))
            #expect(try await pending(app, id, secret).isEmpty)
        }
    }

    @Test func activateClearsTheStashAndLaterPushesAreQueued() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            #expect(try await app.push(id).status == 201)
            let activated = try await app.request(
                "POST", "/api/push/v1/subscriptions/\(id)/activate", headers: [("Authorization", "Bearer \(secret)")])
            #expect(activated.status == 204)
            #expect(try await pending(app, id, secret).isEmpty)
            let state = try await app.postgres.query("SELECT state FROM subscriptions WHERE id = \(id)")
            #expect(try state.first?.decode("state", as: String.self) == "active")
            let message = Fixture.message()
            #expect(try await app.push(id, body: message).status == 201)
            #expect(try await app.queueEntries().map(\.ciphertext) == [message])
            #expect(try await pending(app, id, secret).isEmpty)
        }
    }
}
