import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// The admin API as the ingress starts it (`ADMIN_LISTEN`), and what its changes do
/// to Web Push delivery on the same ingress: effective at once, not after a cache expiry.
@Suite struct AdminWithIngressTests {
    /// An ingress with its admin listener, own Redis namespace and queue stream.
    final class Running: Sendable {
        let application: IngressApplication
        let keys: RedisKeys
        let namespace: String
        let adminPort: Int

        init(redisURL: String = TestEnvironment.redisURL, environment extra: [String: String] = [:]) throws {
            let unique = UInt64.random(in: 0...UInt64.max)
            namespace = "pushgate-admin-test:\(unique)"
            keys = RedisKeys(stream: "\(namespace):queue:{a\(unique)}", namespace: namespace)
            let configuration = try IngressConfiguration(
                environment: Environment(
                    [
                        "DATABASE_URL": TestEnvironment.databaseURL, "REDIS_URL": redisURL,
                        "CREDENTIAL_KEY": Data(SecureRandom.bytes(32)).base64EncodedString(),
                        "PUBLIC_BASE_URL": "https://push.example.test", "INGRESS_LISTEN": "127.0.0.1:0",
                        "ADMIN_LISTEN": "127.0.0.1:0", "ADMIN_TOKEN": AdminHarness.token,
                    ].merging(extra) { $1 }))
            let (logger, _) = TestEnvironment.capturingLogger("ingress")
            application = try buildApplication(configuration: configuration, logger: logger, keys: keys)
            try application.start(sweep: false)
            adminPort = try #require(application.adminServer).port
        }

        func stop() async {
            let found = (try? await application.redis.send("KEYS", namespace + ":*"))?.array ?? []
            let names = found.compactMap(\.bytes)
            if !names.isEmpty { _ = try? await application.redis.send(argv: [Array("DEL".utf8)] + names) }
            await application.shutdown(deadline: .seconds(2))
        }

        static func with(
            redisURL: String = TestEnvironment.redisURL, environment: [String: String] = [:],
            _ body: (Running) async throws -> Void
        ) async throws {
            let running = try Running(redisURL: redisURL, environment: environment)
            do {
                try await body(running)
            } catch {
                await running.stop()
                throw error
            }
            await running.stop()
        }

        func admin(_ method: String, _ path: String, _ body: [String: Any]? = nil) async throws -> AdminHarness.Answer {
            var headers = [("Authorization", "Bearer \(AdminHarness.token)")]
            var bytes: [UInt8] = []
            if let body {
                headers.append(("Content-Type", "application/json"))
                bytes = Array(try JSONSerialization.data(withJSONObject: body))
            }
            let response = try await RawHTTPClient(port: adminPort).request(
                method, "/admin/v1" + path, headers: headers, body: bytes)
            return AdminHarness.Answer(status: response.status, text: response.text)
        }

        /// Registers and activates a device for `topic`; returns the subscription id.
        func subscribe(topic: String) async throws -> String {
            let client = RawHTTPClient(port: application.port)
            let token = SecureRandom.bytes(32).map { String(format: "%02x", $0) }.joined()
            let registered = try await client.request(
                "POST", "/api/push/v1/subscriptions",
                body: Array(#"{"topic": "\#(topic)", "token": "\#(token)", "sandbox": false}"#.utf8))
            try #require(registered.status == 201, "registration: \(registered.status) \(registered.text)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(registered.body)) as? [String: String])
            let (id, secret) = (try #require(object["id"]), try #require(object["secret"]))
            let activated = try await client.request(
                "POST", "/api/push/v1/subscriptions/\(id)/activate", headers: [("Authorization", "Bearer \(secret)")])
            try #require(activated.status == 204)
            return id
        }

        /// One Web Push (a well-formed aes128gcm body) to the subscription's URL.
        func push(_ id: String) async throws -> RawHTTPClient.Response {
            let body = Fixture.message(recordLength: 100)
            return try await RawHTTPClient(port: application.port).request(
                "POST", "/api/push/p/\(id)", headers: [("TTL", "60"), ("Content-Encoding", "aes128gcm")], body: body)
        }

        /// An account on `plan` and an app with push on, a credential and one bundle id (the
        /// credential row and the bundle id placed directly: probing APNs is `CredentialProbeTests`' business).
        func pushingApp(plan: String) async throws -> (account: String, app: String, topic: String) {
            let account = AdminHarness.unique("acct")
            #expect(try await admin("POST", "/accounts", ["id": account, "plan": plan]).status == 201)
            let app = AdminHarness.unique("app")
            #expect(try await admin("POST", "/accounts/\(account)/apps", ["id": app]).status == 201)
            let credential = AdminHarness.unique("cred")
            try await application.postgres.execute(
                """
                INSERT INTO push_credentials (id, account_id, team_id, key_id, sealed_key)
                VALUES (\(credential), \(account), 'TEAM000001', 'KEY0000001', \(SecureRandom.bytes(64)))
                """)
            #expect(try await admin("PATCH", "/apps/\(app)/push", ["credentialId": credential]).status == 200)
            let topic = "com.example.ingress.\(AdminHarness.unique("t").replacingOccurrences(of: "-", with: ""))"
            try await application.postgres.execute(
                "INSERT INTO app_identifiers (bundle_id, app_id) VALUES (\(topic), \(app))")
            #expect(try await admin("PATCH", "/apps/\(app)/push", ["enabled": true]).status == 200)
            return (account, app, topic)
        }
    }

    /// Admin requests that rightly wait long (here on a row lock) use connections of
    /// their own (`ADMIN_DATABASE_CONNECTIONS`): registrations and /readyz, on the one
    /// connection of `DATABASE_CONNECTIONS`, are answered meanwhile.
    @Test func longAdminWorkLeavesRegistrationsAndReadinessTheirConnections() async throws {
        try await Running.with(environment: ["DATABASE_CONNECTIONS": "1", "ADMIN_DATABASE_CONNECTIONS": "2"]) {
            running in
            let (account, _, topic) = try await running.pushingApp(plan: "pro")
            let holding = await AdminHarness.lockAccount(account, forSeconds: 6)
            let renames = (0..<2).map { index in
                Task { try await running.admin("PATCH", "/accounts/\(account)", ["name": "Renamed \(index)"]) }
            }
            try await Task.sleep(for: .milliseconds(500))  // both waiting on the lock

            let client = RawHTTPClient(port: running.application.port)
            let started = ContinuousClock.now
            #expect(try await client.request("GET", "/readyz").status == 200)
            _ = try await running.subscribe(topic: topic)
            #expect(ContinuousClock.now - started < .seconds(2), "waited \(ContinuousClock.now - started)")
            for rename in renames { #expect(try await rename.value.status == 200) }
            try await holding.value
        }
    }

    /// Whether Postgres answers, asked while long admin work waits, is asked over a
    /// connection of its own: with the cache fills' pool taken (a flood of pushes to
    /// unknown URLs) a live Postgres must not look silent and the work answer 503.
    @Test func longAdminWorkIsWaitedForWhileTheFillConnectionsAreTaken() async throws {
        try await Running.with(environment: ["DATABASE_FILL_CONNECTIONS": "1"]) { running in
            let (account, _, _) = try await running.pushingApp(plan: "pro")
            let filling = Task { try await running.application.fillPostgres.query("SELECT pg_sleep(12)") }
            let holding = await AdminHarness.lockAccount(account, forSeconds: 8)
            let renamed = try await running.admin("PATCH", "/accounts/\(account)", ["name": "Renamed"])
            #expect(renamed.status == 200, "\(renamed.text)")
            try await holding.value
            _ = try await filling.value
        }
    }

    @Test func theAdminListenerIsOffWithoutADMIN_LISTEN() async throws {
        let configuration = try IngressConfiguration(
            environment: Environment([
                "DATABASE_URL": TestEnvironment.databaseURL, "REDIS_URL": TestEnvironment.redisURL,
                "CREDENTIAL_KEY": Data(SecureRandom.bytes(32)).base64EncodedString(),
                "PUBLIC_BASE_URL": "https://push.example.test", "INGRESS_LISTEN": "127.0.0.1:0",
            ]))
        let (logger, _) = TestEnvironment.capturingLogger("ingress")
        let application = try buildApplication(configuration: configuration, logger: logger)
        #expect(application.adminServer == nil)
        await application.shutdown(deadline: .seconds(1))
    }

    @Test func disablingPushAnswers1010AtOnceAndEnablingRestoresTheSameURL() async throws {
        try await Running.with { ingress in
            let (_, app, topic) = try await ingress.pushingApp(plan: "plus")
            let subscription = try await ingress.subscribe(topic: topic)
            let first = try await ingress.push(subscription)
            #expect(first.status == 201, "\(first.status) \(first.text)")

            #expect(try await ingress.admin("PATCH", "/apps/\(app)/push", ["enabled": false]).status == 200)
            let saved = ContinuousClock.now
            let refused = try await ingress.push(subscription)
            #expect(refused.status == 403)
            #expect(refused.text == #"{"error": "1010 Push is disabled for this app"}"#)
            // Answered by the invalidated cache, not after an expiry; loose for a contended CI machine.
            #expect(ContinuousClock.now - saved < .seconds(5))

            #expect(try await ingress.admin("PATCH", "/apps/\(app)/push", ["enabled": true]).status == 200)
            #expect(try await ingress.push(subscription).status == 201)
        }
    }

    @Test func aChangeWhoseCacheInvalidationFailedTakesEffectOnceRedisAnswersAgain() async throws {
        // The ingress's Redis is cut off (through a relay) just while the change is
        // saved: the invalidation fails, and is tried again in the background. Without
        // that, the cached app (fresh for CACHE_TTL_SECONDS, 5 minutes) would go on
        // taking pushes for the disabled app.
        let (relay, redisURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
        defer { relay.close() }
        try await Running.with(redisURL: redisURL) { ingress in
            let (_, app, topic) = try await ingress.pushingApp(plan: "plus")
            let subscription = try await ingress.subscribe(topic: topic)
            #expect(try await ingress.push(subscription).status == 201)  // the app is cached now

            relay.cut()
            #expect(try await ingress.admin("PATCH", "/apps/\(app)/push", ["enabled": false]).status == 200)
            try await Task.sleep(for: .milliseconds(300))
            relay.restore()
            let refused = try await Poll.until(timeout: .seconds(30), interval: .milliseconds(100)) {
                try await ingress.push(subscription).status == 403
            }
            #expect(refused, "pushes to the disabled app are refused long before its cache entry ages")
        }
    }

    @Test func plusAt50000Answers1009AndAnUpgradeToProAcceptsAgainAtOnce() async throws {
        try await Running.with { ingress in
            let (account, _, topic) = try await ingress.pushingApp(plan: "plus")
            let subscription = try await ingress.subscribe(topic: topic)
            // 50,000 pushes this month, as the ingress counts them.
            _ = try await ingress.application.redis.send(
                "SET", ingress.keys.quota(account: account, month: RedisKeys.quotaMonth()), 50_000)
            let usage = try await ingress.admin("GET", "/accounts/\(account)/usage")
            #expect(usage.json["used"] as? Int == 50_000)
            #expect(usage.json["limit"] as? Int == 50_000)
            #expect(usage.json["remaining"] as? Int == 0)

            let refused = try await ingress.push(subscription)
            #expect(refused.status == 429)
            #expect(refused.text == #"{"error": "1009 Monthly push quota used up"}"#)

            #expect(try await ingress.admin("PATCH", "/accounts/\(account)", ["plan": "pro"]).status == 200)
            #expect(try await ingress.push(subscription).status == 201)
            let after = try await ingress.admin("GET", "/accounts/\(account)/usage")
            #expect(after.json["used"] as? Int == 50_001)
            #expect(after.json["limit"] as? Int == 500_000)
        }
    }

    /// A deleted account's monthly counts go with it, and with its id's next creation
    /// whatever was left: an account created again under the id starts at zero, not at
    /// (or past) its predecessor's quota.
    @Test func anAccountCreatedAgainUnderADeletedOnesIDStartsAtZero() async throws {
        try await Running.with { ingress in
            let (account, _, _) = try await ingress.pushingApp(plan: "plus")
            let redis = ingress.application.redis
            // This month's and last month's (the last day before this month's first).
            let now = Date()
            let day = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: now).day!
            let lastMonth = RedisKeys.quotaMonth(now.addingTimeInterval(-Double(day) * 86_400))
            let months = [RedisKeys.quotaMonth(now), lastMonth]
            #expect(months[0] != months[1])
            for month in months {
                _ = try await redis.send("SET", ingress.keys.quota(account: account, month: month), 50_000)
            }
            #expect(try await ingress.admin("DELETE", "/accounts/\(account)").status == 204)
            // The server read its own clock: a month that turned meanwhile proves nothing.
            try #require(RedisKeys.quotaMonth() == months[0], "the month turned during the test; run it again")
            for month in months {
                #expect(try await redis.send("EXISTS", ingress.keys.quota(account: account, month: month)).int == 0)
            }
            // A counter the deletion could not drop (Redis away) goes when the id is created again.
            _ = try await redis.send("SET", ingress.keys.quota(account: account, month: months[0]), 50_000)
            #expect(try await ingress.admin("POST", "/accounts", ["id": account, "plan": "plus"]).status == 201)
            let usage = try await ingress.admin("GET", "/accounts/\(account)/usage")
            #expect(usage.json["used"] as? Int == 0)
            #expect(usage.json["remaining"] as? Int == 50_000)
        }
    }

    @Test func theQuotaMonthsOfAnAccountAreLastThisAndNextInUTC() {
        func at(_ text: String) -> Date { ISO8601DateFormatter().date(from: text)! }
        #expect(AccountsController.quotaMonths(around: at("2025-01-01T00:00:00Z")) == ["202412", "202501", "202502"])
        #expect(AccountsController.quotaMonths(around: at("2024-03-01T00:00:00Z")) == ["202402", "202403", "202404"])
        #expect(AccountsController.quotaMonths(around: at("2024-12-31T23:59:59Z")) == ["202411", "202412", "202501"])
    }

    @Test func removingABundleIDMakesItsSubscriptionsUnknownAtOnce() async throws {
        try await Running.with { ingress in
            let (_, app, topic) = try await ingress.pushingApp(plan: "pro")
            let subscription = try await ingress.subscribe(topic: topic)
            #expect(try await ingress.push(subscription).status == 201)
            #expect(try await ingress.admin("PATCH", "/apps/\(app)/push", ["bundleIds": [String]()]).status == 200)
            #expect(try await ingress.push(subscription).status == 404)
        }
    }
}
