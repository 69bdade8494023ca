import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

@Suite struct DeviceRoutesTests {
    @Test func registrationAnswers201WithIdSecretAndURLAndStoresOnlyTheSecretsHash() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let keys = Fixture.keys()
            let token = Fixture.token().uppercased()
            let response = try await app.register(
                topic: fixture.topic.uppercased(), token: token, sandbox: true,
                extra:
                    #", "alert": {"title": "Mail", "body": "New mail"}, "keys": {"p256dh": "\#(keys.p256dh)", "auth": "\#(keys.auth)"}"#
            )
            #expect(response.status == 201)
            #expect(response.headers["content-type"] == "application/json")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String])
            let id = try #require(object["id"])
            let secret = try #require(object["secret"])
            #expect(id.count == 22 && Base64URL.decode(id)?.count == 16)
            #expect(secret.count == 43 && Base64URL.decode(secret)?.count == 32)
            #expect(object["url"] == "\(IngressTestApp.publicBase)/api/push/p/\(id)")
            let rows = try await app.postgres.query(
                "SELECT topic, device_token, sandbox, alert_title, alert_body, state, secret_hash, p256dh, auth FROM subscriptions WHERE id = \(id)"
            )
            let row = try #require(rows.first)
            #expect(try row.decode("topic", as: String.self) == fixture.topic)
            #expect(try row.decode("device_token", as: String.self) == token.lowercased())
            #expect(try row.decode("sandbox", as: Bool.self))
            #expect(try row.decode("alert_title", as: String.self) == "Mail")
            #expect(try row.decode("alert_body", as: String.self) == "New mail")
            #expect(try row.decode("state", as: String.self) == "pending")
            #expect(try row.decode("secret_hash", as: [UInt8].self) == SHA256.hash(secret))
            #expect(try row.decode("p256dh", as: [UInt8].self) == Base64URL.decode(keys.p256dh))
            #expect(try row.decode("auth", as: [UInt8].self) == Base64URL.decode(keys.auth))
        }
    }

    @Test func alertBodyDefaultsToNewNotification() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic, activate: false)
            let rows = try await app.postgres.query("SELECT alert_body FROM subscriptions WHERE id = \(id)")
            #expect(try rows.first?.decode("alert_body", as: String.self) == "New notification")
        }
    }

    static let notJSON = "body is not valid JSON (UTF-8, each member named once, at most 64 levels deep)"

    static let invalidBodies: [(String, String)] = [
        ("{not json", notJSON),
        // What Foundation's decoder let through: a trailing comma, a repeated name (it
        // kept the first, where most parsers keep the last).
        (#"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false,}"#, notJSON),
        (#"{"topic": "TOPIC", "token": "TOKEN", "token": "zz", "sandbox": false}"#, notJSON),
        (#"{"topic": "TOPIC", "token": "TOKEN", "sandbox": true, "\u0073andbox": false}"#, notJSON),
        // Well-formed, but nested past the 64 levels the check follows.
        (
            #"{"topic": "TOPIC", "alert": "# + String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
                + "}",
            notJSON
        ),
        ("[1, 2]", "body must be a JSON object"),
        (#"{"topic": "TOPIC", "token": 12345, "sandbox": false}"#, "token must be a string"),
        (#"{"topic": "TOPIC", "token": "TOKEN", "sandbox": "no"}"#, "sandbox must be a boolean"),
        (#"{"topic": "TOPIC", "token": "TOKEN", "sandbox": 0}"#, "sandbox must be a boolean"),
        (#"{"topic": "TOPIC", "token": "TOKEN"}"#, "sandbox is required (a boolean)"),
        (#"{"token": "TOKEN", "sandbox": false}"#, "topic is required"),
        (#"{"topic": "TOPIC", "sandbox": false}"#, "token is required"),
        (#"{"topic": "TOPIC", "token": "abc", "sandbox": false}"#, "token must be 32 to 200 hex digits"),
        (
            #"{"topic": "TOPIC", "token": "\#(String(repeating: "a", count: 33))", "sandbox": false}"#,
            "token must be 32 to 200 hex digits"
        ),
        (
            #"{"topic": "TOPIC", "token": "\#(String(repeating: "g", count: 64))", "sandbox": false}"#,
            "token must be 32 to 200 hex digits"
        ),
        (
            #"{"topic": "TOPIC", "token": "\#(String(repeating: "a", count: 202))", "sandbox": false}"#,
            "token must be 32 to 200 hex digits"
        ),
        (#"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "alert": "hi"}"#, "alert must be an object"),
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "alert": {"title": 5}}"#,
            "alert.title must be a string"
        ),
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "alert": {"title": "\#(String(repeating: "x", count: 201))"}}"#,
            "alert.title must be at most 200 characters"
        ),
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "alert": {"body": "\#(String(repeating: "x", count: 1001))"}}"#,
            "alert.body must be at most 1000 characters"
        ),
        // Postgres cannot store NUL: a client's mistake, not a storage error.
        (#"{"topic": "TOPIC\u0000", "token": "TOKEN", "sandbox": false}"#, "topic must be a bundle id"),
        (#"{"topic": " TOPIC", "token": "TOKEN", "sandbox": false}"#, "topic must be a bundle id"),
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "alert": {"title": "a\u0000b"}}"#,
            "alert.title must not contain control characters"
        ),
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "alert": {"body": "ding\u0007"}}"#,
            "alert.body must not contain control characters"
        ),
        // The placeholder alone must fit APNs's 4 KB payload: few characters, many bytes.
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "alert": {"title": "e\#(String(repeating: "\u{0301}", count: 800))"}}"#,
            "alert.title must be at most 800 bytes"
        ),
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "alert": {"body": "\#(String(repeating: "😀", count: 751))"}}"#,
            "alert.body must be at most 3000 bytes"
        ),
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "keys": {"p256dh": "P256"}}"#,
            "keys needs both p256dh and auth"
        ),
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "keys": {"p256dh": "not*base64", "auth": "AUTH"}}"#,
            "keys.p256dh must be a base64url uncompressed P-256 point"
        ),
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "keys": {"p256dh": "OFFCURVE", "auth": "AUTH"}}"#,
            "keys.p256dh is not a point on P-256"
        ),
        (
            #"{"topic": "TOPIC", "token": "TOKEN", "sandbox": false, "keys": {"p256dh": "P256", "auth": "AAAA"}}"#,
            "keys.auth must be 16 bytes, base64url"
        ),
    ]

    @Test func invalidRegistrationBodiesAnswer1001() async throws {
        try await IngressTestApp.with(["RATE_LIMIT_REGISTRATION": "1000/60"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let keys = Fixture.keys()
            let offCurve = Base64URL.encode([0x04] + [UInt8](repeating: 1, count: 64))
            for (template, detail) in Self.invalidBodies {
                let body = template.replacingOccurrences(of: "TOPIC", with: fixture.topic)
                    .replacingOccurrences(of: "TOKEN", with: Fixture.token())
                    .replacingOccurrences(of: "OFFCURVE", with: offCurve)
                    .replacingOccurrences(of: "P256", with: keys.p256dh)
                    .replacingOccurrences(of: "AUTH", with: keys.auth)
                let response = try await app.request("POST", "/api/push/v1/subscriptions", body: Array(body.utf8))
                #expect(response.status == 400, "\(template)")
                #expect(response.text == errorBody(1001, "Invalid parameters: \(detail)"), "\(template)")
            }
        }
    }

    @Test func alertTextsAreMeasuredAsThePayloadsJSONCarriesThem() {
        #expect(SubscriptionInput.payloadLength("Mail") == 4)
        #expect(SubscriptionInput.payloadLength("\"\\\n\t\r") == 10)
        #expect(SubscriptionInput.payloadLength("漢😀") == 7)
        #expect(SubscriptionInput.payloadLength("a\u{0}") == nil)
        #expect(SubscriptionInput.payloadLength("a\u{7F}") == nil)
    }

    @Test func unknownTopicDisabledAppAndLitePlanAnswer1008() async throws {
        try await IngressTestApp.with { app in
            let disabled = try await Fixture.create(app.postgres, pushEnabled: false)
            let lite = try await Fixture.create(app.postgres, plan: "lite")
            for topic in ["com.test.nobody.\(UInt32.random(in: 0...UInt32.max))", disabled.topic, lite.topic] {
                let response = try await app.register(topic: topic)
                #expect(response.status == 400)
                #expect(response.text == errorBody(1008, "Unknown app"))
            }
        }
    }

    @Test func jsonBodyOver64KiBAnswers413With1004() async throws {
        try await IngressTestApp.with { app in
            let response = try await app.request(
                "POST", "/api/push/v1/subscriptions", body: Array(repeating: UInt8(ascii: " "), count: 64 * 1024 + 1))
            #expect(response.status == 413)
            #expect(response.text == errorBody(1004, "Message too large"))
        }
    }

    @Test func updateChangesTokenAlertAndKeysAndRefreshesLastSeen() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic)
            // Under an hour old: SweepTests' sweep, running alongside with a one-hour
            // maximum age, deletes every older row in the shared database.
            try await app.postgres.execute(
                "UPDATE subscriptions SET last_seen_at = now() - interval '30 minutes' WHERE id = \(id)")
            // Fill the cache, so the update must invalidate it.
            #expect(try await app.push(id).status == 201)
            let token = Fixture.token()
            let keys = Fixture.keys()
            let body =
                #"{"topic": "\#(fixture.topic)", "token": "\#(token)", "sandbox": true, "alert": {"title": "T", "body": "B"}, "keys": {"p256dh": "\#(keys.p256dh)", "auth": "\#(keys.auth)"}}"#
            let response = try await app.request(
                "PUT", "/api/push/v1/subscriptions/\(id)", headers: [("Authorization", "Bearer \(secret)")],
                body: Array(body.utf8))
            #expect(response.status == 204)
            #expect(response.body.isEmpty)
            let row = try #require(
                try await app.postgres.query(
                    "SELECT device_token, sandbox, alert_title, alert_body, last_seen_at > now() - interval '1 minute' AS fresh FROM subscriptions WHERE id = \(id)"
                ).first)
            #expect(try row.decode("device_token", as: String.self) == token)
            #expect(try row.decode("sandbox", as: Bool.self))
            #expect(try row.decode("alert_title", as: String.self) == "T")
            #expect(try row.decode("alert_body", as: String.self) == "B")
            #expect(try row.decode("fresh", as: Bool.self))
            #expect(try await app.push(id).status == 201)
            let entries = try await app.queueEntries()
            #expect(entries.map(\.deviceToken).last == token)
            #expect(entries.last?.sandbox == true)
            #expect(entries.last?.alertTitle == "T")
        }
    }

    /// `{}`, no body at all (what an app refreshing on launch may send) and a blank
    /// one: each only refreshes the last-seen time.
    @Test func updateWithEmptyBodyOnlyRefreshesLastSeen() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic)
            let token = try #require(
                try await app.postgres.query("SELECT device_token FROM subscriptions WHERE id = \(id)").first
            ).decode("device_token", as: String.self)
            for body in ["{}", "", " \r\n"] {
                // Under an hour old: see updateChangesTokenAlertAndKeysAndRefreshesLastSeen.
                try await app.postgres.execute(
                    "UPDATE subscriptions SET last_seen_at = now() - interval '30 minutes' WHERE id = \(id)")
                let response = try await app.request(
                    "PUT", "/api/push/v1/subscriptions/\(id)", headers: [("Authorization", "Bearer \(secret)")],
                    body: Array(body.utf8))
                #expect(response.status == 204, "body \(body.debugDescription)")
                let row = try #require(
                    try await app.postgres.query(
                        "SELECT device_token, last_seen_at > now() - interval '1 minute' AS fresh FROM subscriptions WHERE id = \(id)"
                    ).first)
                #expect(try row.decode("fresh", as: Bool.self), "body \(body.debugDescription)")
                #expect(try row.decode("device_token", as: String.self) == token)
            }
        }
    }

    @Test func updateRejectsTopicChangeAndBadFields() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic)
            let auth = [("Authorization", "Bearer \(secret)")]
            let changed = try await app.request(
                "PUT", "/api/push/v1/subscriptions/\(id)", headers: auth, body: Array(#"{"topic": "com.other"}"#.utf8))
            #expect(changed.status == 400)
            #expect(
                changed.text
                    == errorBody(1001, "Invalid parameters: topic cannot be changed; register a new subscription"))
            let bad = try await app.request(
                "PUT", "/api/push/v1/subscriptions/\(id)", headers: auth, body: Array(#"{"sandbox": "yes"}"#.utf8))
            #expect(bad.text == errorBody(1001, "Invalid parameters: sandbox must be a boolean"))
            let malformed = try await app.request(
                "PUT", "/api/push/v1/subscriptions/\(id)", headers: auth, body: Array("{".utf8))
            #expect(malformed.status == 400)
            let nul = try await app.request(
                "PUT", "/api/push/v1/subscriptions/\(id)", headers: auth,
                body: Array(#"{"alert": {"title": "\u0000"}}"#.utf8))
            #expect(nul.status == 400)
            #expect(nul.text == errorBody(1001, "Invalid parameters: alert.title must not contain control characters"))
        }
    }

    @Test func missingAuthorizationIs1002AndWrongSecretOrUnknownIdIs1003OnEveryEndpoint() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            let unknown = Base64URL.encode(SecureRandom.bytes(16))
            let endpoints: [(String, String)] = [
                ("PUT", "/api/push/v1/subscriptions/ID"), ("GET", "/api/push/v1/subscriptions/ID/pending"),
                ("POST", "/api/push/v1/subscriptions/ID/activate"), ("DELETE", "/api/push/v1/subscriptions/ID"),
            ]
            for (method, template) in endpoints {
                let path = template.replacingOccurrences(of: "ID", with: id)
                let missing = try await app.request(method, path, body: Array("{}".utf8))
                #expect(missing.status == 401)
                #expect(missing.text == errorBody(1002, "Missing credentials"))
                let basic = try await app.request(method, path, headers: [("Authorization", "Basic \(secret)")])
                #expect(basic.status == 401)
                let wrong = try await app.request(
                    method, path, headers: [("Authorization", "Bearer \(secret)x")], body: Array("{}".utf8))
                #expect(wrong.status == 404)
                #expect(wrong.text == errorBody(1003, "Subscription not found"))
                let other = try await app.request(
                    method, template.replacingOccurrences(of: "ID", with: unknown),
                    headers: [("Authorization", "Bearer \(secret)")], body: Array("{}".utf8))
                #expect(other.status == 404)
                #expect(other.text == wrong.text)
            }
            // Nothing changed.
            let state = try await app.postgres.query("SELECT state FROM subscriptions WHERE id = \(id)")
            #expect(try state.first?.decode("state", as: String.self) == "pending")
        }
    }

    @Test func deleteRemovesRowAndStashLeavesANegativeEntryAndLaterPushesAre404() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            #expect(try await app.push(id).status == 201)  // stashed, cache filled
            let response = try await app.request(
                "DELETE", "/api/push/v1/subscriptions/\(id)", headers: [("Authorization", "Bearer \(secret)")])
            #expect(response.status == 204)
            #expect(try await app.postgres.query("SELECT 1 FROM subscriptions WHERE id = \(id)").isEmpty)
            #expect(try await app.redis.send("EXISTS", app.keys.stash(id)).int == 0)
            // The cache keeps only its absence: a negative entry, so pushes are answered from Redis.
            let entry = app.keys.subscription(id)
            #expect(try await app.redis.send("HGET", entry, SubscriptionCacheField.missing).string == "1")
            #expect(try await app.redis.send("HEXISTS", entry, SubscriptionCacheField.part).int == 0)
            let push = try await app.push(id)
            #expect(push.status == 404)
            #expect(push.text == errorBody(1003, "Subscription not found"))
            let again = try await app.request(
                "DELETE", "/api/push/v1/subscriptions/\(id)", headers: [("Authorization", "Bearer \(secret)")])
            #expect(again.status == 404)
        }
    }
}
