import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

@Suite struct UsersAndKeysTests {
    @Test func usersAreUpsertedAndCarryPerAppStateAndASiteWideBan() async throws {
        try await AdminHarness.with { admin in
            let app = try await admin.app(account: try await admin.account())
            let user = AdminHarness.unique("user")
            #expect(try await admin.call("PUT", "/users/\(user)").status == 201)
            #expect(try await admin.call("PUT", "/users/\(user)").status == 200)

            let set = try await admin.call(
                "PATCH", "/apps/\(app)/users/\(user)",
                ["authorized": true, "unsubscribed": true, "disabled": true, "disabledReason": "abuse"])
            #expect(set.status == 200)
            #expect(set.json["authorized"] as? Bool == true)
            #expect(set.json["unsubscribed"] as? Bool == true)
            #expect(set.json["disabled"] as? Bool == true)
            #expect(set.json["disabledReason"] as? String == "abuse")
            // A reason alone changes a disabled user's reason; it is refused where it
            // would be dropped (with disabled: false, or for a user not disabled).
            let reworded = try await admin.call(
                "PATCH", "/apps/\(app)/users/\(user)", ["disabledReason": "abuse, twice"])
            #expect(reworded.json["disabled"] as? Bool == true)
            #expect(reworded.json["disabledReason"] as? String == "abuse, twice")
            // `disabled: true` alone (absent is unchanged) keeps the reason.
            let restated = try await admin.call("PATCH", "/apps/\(app)/users/\(user)", ["disabled": true])
            #expect(restated.json["disabledReason"] as? String == "abuse, twice")
            let contradictory = try await admin.call(
                "PATCH", "/apps/\(app)/users/\(user)", ["disabled": false, "disabledReason": "x"])
            #expect(contradictory.status == 400)
            #expect(contradictory.text.contains("invalid_request"))
            let other = try await admin.app(account: try await admin.account())
            let unused = try await admin.call("PATCH", "/apps/\(other)/users/\(user)", ["disabledReason": "x"])
            #expect(unused.status == 400)
            #expect(try await admin.call("GET", "/apps/\(other)/users/\(user)").json["disabled"] as? Bool == false)

            let banned = try await admin.call("PUT", "/users/\(user)/ban", ["reason": "spam"])
            #expect((banned.json["banned"] as? [String: Any])?["reason"] as? String == "spam")
            let shown = try await admin.call("GET", "/users/\(user)")
            let apps = shown.json["apps"] as? [[String: Any]]
            #expect(apps?.count == 1)
            #expect(apps?.first?["appId"] as? String == app)
            let unbanned = try await admin.call("DELETE", "/users/\(user)/ban")
            #expect(unbanned.json["banned"] is NSNull)
            // A ban without a reason says so with null, as every absent value does.
            let bare = try await admin.call("PUT", "/users/\(user)/ban", [:])
            #expect((bare.json["banned"] as? [String: Any])?["reason"] is NSNull)
            let blank = try await admin.call("PUT", "/users/\(user)/ban", ["reason": " \n"])
            #expect((blank.json["banned"] as? [String: Any])?["reason"] is NSNull)
            #expect(try await admin.call("DELETE", "/users/\(user)/ban").status == 200)

            let cleared = try await admin.call(
                "PATCH", "/apps/\(app)/users/\(user)", ["unsubscribed": false, "disabled": false])
            #expect(cleared.json["unsubscribed"] as? Bool == false)
            #expect(cleared.json["disabled"] as? Bool == false)
            #expect(cleared.json["authorized"] as? Bool == true)
        }
    }

    /// Revoking leaves the user's subscriptions bound (the App API skips them), so it
    /// does not turn them into anonymous ones that no unsubscribe or ban applies to.
    @Test func revokingAnAuthorizationKeepsTheUsersSubscriptionsBound() async throws {
        let invalidator = RecordingInvalidator()
        try await AdminHarness.with(invalidator: invalidator) { admin in
            let app = try await admin.app(account: try await admin.account())
            let bundle = "com.example.users.\(AdminHarness.unique("u").replacingOccurrences(of: "-", with: ""))"
            try await admin.insertIdentifier(bundle, app: app)
            let user = AdminHarness.unique("user")
            _ = try await admin.call("PATCH", "/apps/\(app)/users/\(user)", ["authorized": true])
            let bound = try await admin.insertSubscription(app: app, topic: bundle, user: user)
            let revoked = try await admin.call("PATCH", "/apps/\(app)/users/\(user)", ["authorized": false])
            #expect(revoked.json["authorized"] as? Bool == false)
            #expect(try await admin.subscriptionExists(bound))
            let owner = try await admin.postgres.query("SELECT user_id FROM subscriptions WHERE id = \(bound)")
            #expect(try owner[0].decode("user_id", as: String?.self) == user)
            #expect(invalidator.events.last == "user \(user) \(app)")
            let granted = try await admin.call("PATCH", "/apps/\(app)/users/\(user)", ["authorized": true])
            #expect(granted.json["authorized"] as? Bool == true)
            let still = try await admin.postgres.query("SELECT user_id FROM subscriptions WHERE id = \(bound)")
            #expect(try still[0].decode("user_id", as: String?.self) == user)
        }
    }

    @Test func anAPIKeyIsShownOnceStoredAsItsSHA256AndRevocable() async throws {
        try await AdminHarness.with { admin in
            let app = try await admin.app(account: try await admin.account())
            let created = try await admin.call("POST", "/apps/\(app)/keys", ["name": "backend"])
            #expect(created.status == 201)
            let key = try #require(created.json["key"] as? String)
            #expect(AppAPIKey.isWellFormed(key))
            #expect(created.json["scopes"] as? [String] == ["push:send"])
            let id = try #require(created.json["id"] as? Int)

            let stored = try await admin.postgres.query("SELECT key_hash FROM app_api_keys WHERE id = \(id)")
            #expect(try stored[0].decode("key_hash", as: [UInt8].self) == SHA256.hash(key))
            let listed = try await admin.call("GET", "/apps/\(app)/keys")
            #expect(listed.status == 200)
            let keys = try #require(listed.json["keys"] as? [[String: Any]])
            #expect(keys.count == 1 && keys[0]["id"] as? Int == id)
            #expect(!listed.text.contains(key))
            #expect(keys[0]["key"] == nil)

            let revoked = try await admin.call("DELETE", "/apps/\(app)/keys/\(id)")
            #expect(revoked.status == 200)
            #expect(revoked.json["revokedAt"] is String)
            let unknownScope = try await admin.call("POST", "/apps/\(app)/keys", ["scopes": ["push:everything"]])
            #expect(unknownScope.status == 400)
            #expect(unknownScope.errorMessage == "unknown scope push:everything; known: push:send")
            #expect(try await admin.call("DELETE", "/apps/\(app)/keys/999999999").status == 404)
        }
    }
}
