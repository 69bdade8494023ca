import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// Keys and scopes, the per-app limit, bind/unbind and the device list.
@Suite struct AppAPIAccessTests {
    @Test func keysAreCheckedAndScopesEnforcedWithNamedErrors() async throws {
        try await DeliveryStack.with { stack in
            let user = try await stack.user()
            let missing = try await stack.api("GET", "/users/\(user)/devices", key: nil)
            #expect(missing.status == 401)
            #expect(missing.text.contains("missing App API key"))
            let unknown = try await stack.api("GET", "/users/\(user)/devices", key: "pgk_nope")
            #expect(unknown.status == 401)
            #expect(unknown.text.contains("unknown or revoked"))
            let revoked = try await stack.apiKey(revoked: true)
            #expect(try await stack.api("GET", "/users/\(user)/devices", key: revoked).status == 401)
            let unscoped = try await stack.apiKey(scopes: [])
            let forbidden = try await stack.api("GET", "/users/\(user)/devices", key: unscoped)
            #expect(forbidden.status == 403)
            #expect(forbidden.text.contains("push:send"))
            let key = try await stack.apiKey()
            #expect(try await stack.api("GET", "/users/\(user)/devices", key: key).status == 200)
            let head = try await stack.api("HEAD", "/users/\(user)/devices", key: key)
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            let post = try await stack.api("POST", "/users/\(user)/devices", key: key)
            #expect(post.status == 405)
            #expect(post.headers["allow"] == "GET, HEAD")
        }
    }

    /// Keys are looked up in Postgres: past `RATE_LIMIT_APP_API_KEY_FAILURES` invalid
    /// keys from one client IP, its requests answer 429 before any lookup until the
    /// window moves on, but for keys found valid lately (another backend behind the
    /// same address), which are still looked up: one revoked meanwhile is refused.
    /// A request without a key needs no lookup and never touches that allowance: 401.
    @Test func invalidKeysArePerClientIPLimited() async throws {
        try await DeliveryStack.with(ingress: ["RATE_LIMIT_APP_API_KEY_FAILURES": "2/60"]) { stack in
            let user = try await stack.user()
            let key = try await stack.apiKey()
            #expect(try await stack.api("GET", "/users/\(user)/devices", key: key).status == 200)  // not counted
            for _ in 0..<2 {
                #expect(try await stack.api("GET", "/users/\(user)/devices", key: "pgk_guess").status == 401)
            }
            let limited = try await stack.api("GET", "/users/\(user)/devices", key: "pgk_guess")
            #expect(limited.status == 429)
            #expect(limited.text == #"{"error": "1006 Too many requests"}"#)
            #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 >= 1)
            #expect(try await stack.api("GET", "/users/\(user)/devices", key: key).status == 200)
            let unseen = try await stack.apiKey()  // valid, but not seen by this ingress yet
            #expect(try await stack.api("GET", "/users/\(user)/devices", key: unseen).status == 429)
            try await stack.postgres.execute(
                "UPDATE app_api_keys SET revoked_at = now() WHERE key_hash = \(SHA256.hash(key))")
            #expect(try await stack.api("GET", "/users/\(user)/devices", key: key).status == 401)
            #expect(try await stack.api("GET", "/users/\(user)/devices", key: nil).status == 401)
        }
    }

    @Test func thePerAppLimitIsSharedByAllEndpointsAndAnswers429With1006AndRetryAfter() async throws {
        try await DeliveryStack.with(ingress: ["RATE_LIMIT_APP_API": "3/60"]) { stack in
            let key = try await stack.apiKey()
            let otherKey = try await stack.apiKey()  // same app: same window
            let user = try await stack.user()
            #expect(try await stack.api("GET", "/users/\(user)/devices", key: key).status == 200)
            #expect(try await stack.api("POST", "/send", key: otherKey, json: #"{"messages":[]}"#).status == 400)
            #expect(try await stack.api("DELETE", "/subscriptions/x/bind", key: key).status == 404)
            let limited = try await stack.api("GET", "/users/\(user)/devices", key: otherKey)
            #expect(limited.status == 429)
            #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 >= 1)
            #expect(limited.text == #"{"error": "1006 Too many requests"}"#)
        }
    }

    @Test func bindChecksSecretAppAndAuthorizationMovesAndUnbinds() async throws {
        try await DeliveryStack.with { stack in
            let key = try await stack.apiKey()
            let device = try await stack.device()
            let alice = try await stack.user()
            let bob = try await stack.user()
            let stranger = try await stack.user(authorized: false)

            let wrongSecret = try await stack.bind(device.id, secret: "not-the-secret", user: alice, key: key)
            #expect(wrongSecret.status == 403)
            #expect(wrongSecret.text.contains("secret"))
            let unauthorized = try await stack.bind(device.id, secret: device.secret, user: stranger, key: key)
            #expect(unauthorized.status == 403)
            #expect(unauthorized.text.contains("authorized"))
            let unknown = try await stack.bind("AAAAAAAAAAAAAAAAAAAAAA", secret: device.secret, user: alice, key: key)
            #expect(unknown.status == 404)
            #expect(try await stack.api("POST", "/subscriptions/bind", key: key, json: "{}").status == 400)
            // A user id no user can have (Postgres text holds no NUL) is no user, not a storage error.
            let nul = try await stack.bind(device.id, secret: device.secret, user: alice + #"\u0000"#, key: key)
            #expect(nul.status == 403)
            #expect(nul.text.contains("authorized"))

            // Another app's key cannot bind this app's subscription.
            let other = try await Fixture.create(stack.postgres)
            let otherKey = try await stack.apiKey(app: other.appID)
            #expect(try await stack.bind(device.id, secret: device.secret, user: alice, key: otherKey).status == 404)

            #expect(try await stack.bind(device.id, secret: device.secret, user: alice, key: key).status == 204)
            let listed = try await stack.devices(alice, key: key)
            #expect(listed.count == 1)
            #expect(listed.first?["id"] as? String == device.id)
            #expect(listed.first?["platform"] as? String == "ios")
            #expect(listed.first?["sandbox"] as? Bool == false)
            #expect((listed.first?["keys"] as? [String: String])?["auth"]?.isEmpty == false)
            #expect(listed.first?["createdAt"] is String)
            #expect(listed.first?["lastPushAt"] is NSNull)
            #expect(try await stack.devices(alice, key: otherKey).isEmpty)  // this app only

            // Re-binding to another user moves it.
            #expect(try await stack.bind(device.id, secret: device.secret, user: bob, key: key).status == 204)
            #expect(try await stack.devices(alice, key: key).isEmpty)
            #expect(try await stack.devices(bob, key: key).count == 1)

            // Unbinding keeps the subscription, anonymous.
            #expect(try await stack.api("DELETE", "/subscriptions/\(device.id)/bind", key: otherKey).status == 404)
            #expect(try await stack.api("DELETE", "/subscriptions/\(device.id)/bind", key: key).status == 204)
            #expect(try await stack.devices(bob, key: key).isEmpty)
            #expect(try await stack.subscriptionExists(device.id))

            // Pending devices are not listed.
            let pending = try await stack.device(activate: false)
            #expect(try await stack.bind(pending.id, secret: pending.secret, user: alice, key: key).status == 204)
            #expect(try await stack.devices(alice, key: key).isEmpty)
        }
    }

    /// The HTTP server hands over the path percent-decoded already; decoding it again
    /// would turn a user id holding a literal `%41` into another user's (`A`).
    @Test func theUserIDInThePathIsPercentDecodedOnce() async throws {
        try await DeliveryStack.with { stack in
            let key = try await stack.apiKey()
            let user = "u%41-" + Base64URL.encode(SecureRandom.bytes(6))
            try await stack.postgres.execute("INSERT INTO users (id) VALUES (\(user))")
            try await stack.postgres.execute(
                "INSERT INTO app_authorizations (user_id, app_id) VALUES (\(user), \(stack.fixture.appID))")
            let device = try await stack.device()
            #expect(try await stack.bind(device.id, secret: device.secret, user: user, key: key).status == 204)
            let listed = try await stack.devices(user.replacingOccurrences(of: "%", with: "%25"), key: key)
            #expect(listed.map { $0["id"] as? String } == [device.id])
        }
    }
}
