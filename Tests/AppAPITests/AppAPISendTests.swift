import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// `POST /send`: ingress-decided and worker-decided outcomes, in request order.
@Suite struct AppAPISendTests {
    @Test func zeroOrMoreThanAHundredMessagesAre400() async throws {
        try await DeliveryStack.with { stack in
            let key = try await stack.apiKey()
            let empty = try await stack.api("POST", "/send", key: key, json: #"{"messages":[]}"#)
            #expect(empty.status == 400)
            #expect(empty.text.contains("1 to 100"))
            let item = #"{"subscriptionId":"AAAAAAAAAAAAAAAAAAAAAA","payload":"AAAA"}"#
            let many = Array(repeating: item, count: 101).joined(separator: ",")
            #expect(try await stack.api("POST", "/send", key: key, json: #"{"messages":[\#(many)]}"#).status == 400)
            #expect(try await stack.api("POST", "/send", key: key, json: "not json").status == 400)
            let urgent =
                #"{"messages":[{"subscriptionId":"AAAAAAAAAAAAAAAAAAAAAA","payload":"AAAA","urgency":"urgent"}]}"#
            let badUrgency = try await stack.api("POST", "/send", key: key, json: urgent)
            #expect(badUrgency.status == 400)
            #expect(badUrgency.text.contains("urgency must be very-low, low, normal or high"))
            let numeric = #"{"messages":[{"subscriptionId":"AAAAAAAAAAAAAAAAAAAAAA","payload":"AAAA","urgency":5}]}"#
            #expect(try await stack.api("POST", "/send", key: key, json: numeric).status == 400)
            let hundred = Array(repeating: item, count: 100).joined(separator: ",")
            #expect(try await stack.api("POST", "/send", key: key, json: #"{"messages":[\#(hundred)]}"#).status == 200)
            // A message without an id string is a malformed request; an empty id names no subscription.
            for malformed in [#"{"payload":"AAAA"}"#, #"{"subscriptionId":7,"payload":"AAAA"}"#] {
                let answer = try await stack.api("POST", "/send", key: key, json: #"{"messages":[\#(malformed)]}"#)
                #expect(answer.status == 400)
                #expect(answer.text.contains("each message needs a subscriptionId string"))
            }
            #expect(
                statuses(try await stack.send([("", "AAAA"), ("AAAAAAAAAAAAAAAAAAAAAA", "AAAA")], key: key)) == [
                    "not_found", "not_found",
                ])
        }
    }

    /// The spec allows 100 messages of up to 8 KB each in one request: the body
    /// (about 1.1 MB of base64url) must not be cut off by the 64 KB JSON limit.
    @Test func aHundredMessagesOfEightKilobytesFitInOneRequest() async throws {
        try await DeliveryStack.with { stack in
            let key = try await stack.apiKey()
            let device = try await stack.device()
            let full = Base64URL.encode(SecureRandom.bytes(SendBatch.maximumPayloadBytes))
            let over = Base64URL.encode(SecureRandom.bytes(SendBatch.maximumPayloadBytes + 1))
            var messages = Array(repeating: ("AAAAAAAAAAAAAAAAAAAAAA", full), count: 98)
            messages += [(device.id, over), (device.id, "not base64url!")]
            let answered = try await stack.send(messages, key: key)
            #expect(answered.count == 100)
            #expect(statuses(answered) == Array(repeating: "not_found", count: 98) + ["invalid", "invalid"])
            // As README documents: `reason` is empty unless the status is `failed`.
            #expect(answered.allSatisfy { $0["reason"] == "" })
        }
    }

    /// Base64url as RFC 4648 §5 defines it may keep its `=` padding (Python's
    /// `urlsafe_b64encode` does); only misplaced padding is invalid.
    @Test func aPaddedBase64URLPayloadIsAcceptedAndMisplacedPaddingIsInvalid() async throws {
        try await DeliveryStack.with(ingress: ["APP_API_SEND_DEADLINE_MS": "300"]) { stack in
            let key = try await stack.apiKey()
            let device = try await stack.device()
            let padded = Data(SecureRandom.bytes(100)).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            #expect(padded.hasSuffix("=="))
            let answered = try await stack.send(
                [(device.id, padded), (device.id, "AAAA="), (device.id, "AA=A"), (device.id, "A===")], key: key)
            #expect(statuses(answered) == ["queued", "invalid", "invalid", "invalid"])
        }
    }

    /// Every status in one batch, in request order. Enqueued before the worker
    /// starts, so the quota's last units go to exactly the messages before the
    /// quota_exceeded ones; the unit the dead token gives back goes to the first of
    /// those (quota counts what was handed to APNs), the second stays refused.
    @Test func aMixedBatchAnswersEveryStatusInOrder() async throws {
        try await DeliveryStack.with { stack in
            let key = try await stack.apiKey()
            let circuitDevice = try await stack.device(sandbox: true)
            _ = try await stack.redis.send(
                "SET", stack.keys.circuit(credential: stack.credentialID, environment: "sandbox"), "1", "EX", "60")
            let sent = try await stack.device()
            let uninstalled = try await stack.device()
            try await stack.controlRequest("POST", "/devices/\(uninstalled.token)/uninstall")
            let overQuota = try await stack.device()
            let stillOverQuota = try await stack.device()
            let pending = try await stack.device(activate: false)
            let other = try await Fixture.create(stack.postgres)
            let foreign = try await stack.device(topic: other.topic)
            let unsubscribed = try await stack.user()
            let muted = try await stack.device()
            #expect(try await stack.bind(muted.id, secret: muted.secret, user: unsubscribed, key: key).status == 204)
            try await stack.postgres.execute(
                "INSERT INTO app_unsubscribes (user_id, app_id) VALUES (\(unsubscribed), \(stack.fixture.appID))")
            let bad = try await stack.device()
            // Two units left this month.
            _ = try await stack.redis.send(
                "SET", stack.keys.quota(account: stack.fixture.accountID, month: RedisKeys.quotaMonth()), 49_998)

            let payload = DeliveryStack.payload
            async let results = stack.send(
                [
                    (circuitDevice.id, payload), (sent.id, payload), (uninstalled.id, payload),
                    (overQuota.id, payload), (stillOverQuota.id, payload), (pending.id, payload), (foreign.id, payload),
                    ("AAAAAAAAAAAAAAAAAAAAAA", payload), (muted.id, payload), (bad.id, "not base64url!"),
                ], key: key)
            try await eventually("both enqueued") { try await stack.queuedMessages() == 2 }
            try await stack.startWorker()
            let answered = try await results
            #expect(
                answered.map { $0["subscriptionId"] ?? "" } == [
                    circuitDevice.id, sent.id, uninstalled.id, overQuota.id, stillOverQuota.id, pending.id, foreign.id,
                    "AAAAAAAAAAAAAAAAAAAAAA", muted.id, bad.id,
                ])
            #expect(
                statuses(answered) == [
                    "failed", "sent", "gone", "sent", "quota_exceeded", "inactive", "not_found", "not_found",
                    "skipped", "invalid",
                ])
            #expect(answered[0]["reason"] == "provider_error")
            #expect(answered[1]["reason"] == "")
            #expect(answered[9]["reason"] == "")
            #expect(stack.recordings(token: sent.token).count == 1)
            #expect(stack.recordings(token: overQuota.token).count == 1)
            #expect(stack.recordings(token: stillOverQuota.token).isEmpty)
            #expect(try await stack.quota() == 50_000)
            // Counted as answered; the circuit's refusal also as undeliverable.
            let metrics = stack.ingress.metrics
            for (status, reason, count) in [
                ("failed", "provider_error", 1.0), ("sent", "", 2), ("gone", "", 1), ("quota_exceeded", "", 1),
                ("inactive", "", 1), ("not_found", "", 2), ("skipped", "", 1), ("invalid", "", 1),
            ] {
                #expect(metrics.appAPIMessages.value(status, reason) == count, "\(status)")
            }
            #expect(metrics.undeliverable.value("circuit") == 1)
        }
    }

    @Test func withoutAnOutcomeBeforeTheDeadlineTheStatusIsQueued() async throws {
        try await DeliveryStack.with(ingress: ["APP_API_SEND_DEADLINE_MS": "300"]) { stack in
            let key = try await stack.apiKey()
            let device = try await stack.device()
            let start = ContinuousClock.now
            let answered = try await stack.send([(device.id, DeliveryStack.payload)], key: key)
            #expect(statuses(answered) == ["queued"])
            // Well under the default deadline (10 s), which an ignored setting would
            // wait for; loose enough for a contended CI machine.
            #expect(ContinuousClock.now - start < .seconds(8))
            #expect(try await stack.queuedMessages() == 1)
        }
    }

    /// A body over the send's limit is a 413 in the App API's format.
    @Test func aBodyOverTheLimitIsA413InTheAppAPIsFormat() async throws {
        try await DeliveryStack.with { stack in
            let key = try await stack.apiKey()
            let padding = String(repeating: "A", count: SendBatch.maximumBodyBytes)
            let over = try await stack.api(
                "POST", "/send", key: key,
                json: #"{"messages":[{"subscriptionId":"AAAAAAAAAAAAAAAAAAAAAA","payload":"\#(padding)"}]}"#)
            #expect(over.status == 413)
            #expect(over.text == #"{"error": "request body too large"}"#)
        }
    }

    /// A send still waiting for outcomes when the ingress starts stopping answers what
    /// it has (`queued`) within about a second, inside the drain. The drain's end cut
    /// it off with a 503 instead, which hid the queued message (a retry sends it twice).
    @Test func aSendWaitingWhenTheIngressStopsAnswersQueued() async throws {
        // A send deadline past the drain's: only the stop can end the wait in time.
        try await DeliveryStack.with(ingress: ["APP_API_SEND_DEADLINE_MS": "30000"]) { stack in
            let key = try await stack.apiKey()
            let device = try await stack.device()
            let sending = Task { try await stack.send([(device.id, DeliveryStack.payload)], key: key) }
            try await eventually("queued") { try await stack.queuedMessages() == 1 }
            await stack.ingress.shutdown(deadline: .seconds(4))
            #expect(statuses(try await sending.value) == ["queued"])
        }
    }

    /// Sends waiting on workers that do not answer (none runs here) wait on
    /// connections of their own: the pool every other route and `/readyz` use stays
    /// free, and a send that finds the reply connections busy answers `queued`.
    @Test func sendsWaitingForOutcomesDoNotStarveTheOtherRoutes() async throws {
        try await DeliveryStack.with(ingress: [
            "APP_API_SEND_DEADLINE_MS": "4000", "REDIS_CONNECTIONS": "2", "APP_API_REPLY_CONNECTIONS": "2",
        ]) { stack in
            let key = try await stack.apiKey()
            let device = try await stack.device()
            let start = ContinuousClock.now
            let waiting = (0..<6).map { _ in
                Task { try await stack.send([(device.id, DeliveryStack.payload)], key: key) }
            }
            try await eventually("all enqueued") { try await stack.queuedMessages() == 6 }
            // Each send holds a reply connection for a second at a time; with the
            // shared pool of two, the readiness check's PING could not get one in 2 s.
            for _ in 0..<3 {
                let ready = try await stack.request("GET", "/readyz")
                #expect(ready.status == 200, "\(ready.text)")
                try await Task.sleep(for: .milliseconds(300))
            }
            for task in waiting { #expect(try await statuses(task.value) == ["queued"]) }
            #expect(ContinuousClock.now - start < .seconds(30))
        }
    }

    @Test func quotaReachedInTheMiddleOfABatchLeavesTheRestQuotaExceeded() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let key = try await stack.apiKey()
            var devices: [(id: String, secret: String, token: String)] = []
            for _ in 0..<5 { devices.append(try await stack.device()) }
            _ = try await stack.redis.send(
                "SET", stack.keys.quota(account: stack.fixture.accountID, month: RedisKeys.quotaMonth()), 49_998)
            let answered = try await stack.send(devices.map { ($0.id, DeliveryStack.payload) }, key: key)
            #expect(statuses(answered) == ["sent", "sent", "quota_exceeded", "quota_exceeded", "quota_exceeded"])
            #expect(try await stack.quota() == 50_000)
        }
    }

    @Test func unbindThenSendDeliversAnonymouslyAndUnsubscribedUsersAreSkipped() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let key = try await stack.apiKey()
            let user = try await stack.user()
            let bound = try await stack.device()
            let anonymous = try await stack.device()
            #expect(try await stack.bind(bound.id, secret: bound.secret, user: user, key: key).status == 204)
            try await stack.postgres.execute(
                "INSERT INTO app_unsubscribes (user_id, app_id) VALUES (\(user), \(stack.fixture.appID))")
            let first = try await stack.send(
                [(bound.id, DeliveryStack.payload), (anonymous.id, DeliveryStack.payload)], key: key)
            #expect(statuses(first) == ["skipped", "sent"])
            #expect(stack.recordings(token: bound.token).isEmpty)
            #expect(stack.recordings(token: anonymous.token).count == 1)

            #expect(try await stack.api("DELETE", "/subscriptions/\(bound.id)/bind", key: key).status == 204)
            let second = try await stack.send([(bound.id, DeliveryStack.payload)], key: key)
            #expect(statuses(second) == ["sent"])
            #expect(stack.recordings(token: bound.token).count == 1)
        }
    }

    /// Revoking the app's authorization does not make the user's devices anonymous,
    /// which no unsubscribe or ban applies to: sends to them are skipped and the user's
    /// device list is empty until the user authorizes the app again. Deleting the
    /// user unbinds them.
    @Test func devicesOfAUserWhoRevokedTheAppAreSkippedNotMadeAnonymous() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let key = try await stack.apiKey()
            let (user, app) = (try await stack.user(), stack.fixture.appID)
            let device = try await stack.device()
            #expect(try await stack.bind(device.id, secret: device.secret, user: user, key: key).status == 204)
            let revoke: PostgresQuery = "DELETE FROM app_authorizations WHERE user_id = \(user) AND app_id = \(app)"
            let grant: PostgresQuery = "INSERT INTO app_authorizations (user_id, app_id) VALUES (\(user), \(app))"
            try await stack.postgres.execute("INSERT INTO app_unsubscribes (user_id, app_id) VALUES (\(user), \(app))")
            try await stack.postgres.execute(revoke)
            #expect(statuses(try await stack.send([(device.id, DeliveryStack.payload)], key: key)) == ["skipped"])
            #expect(try await stack.devices(user, key: key).isEmpty)
            // The revocation alone skips too.
            try await stack.postgres.execute("DELETE FROM app_unsubscribes WHERE user_id = \(user) AND app_id = \(app)")
            #expect(statuses(try await stack.send([(device.id, DeliveryStack.payload)], key: key)) == ["skipped"])
            #expect(stack.recordings(token: device.token).isEmpty)

            // Authorized again: the binding held.
            try await stack.postgres.execute(grant)
            #expect(try await stack.devices(user, key: key).count == 1)
            #expect(statuses(try await stack.send([(device.id, DeliveryStack.payload)], key: key)) == ["sent"])
            #expect(stack.recordings(token: device.token).count == 1)

            try await stack.postgres.execute("DELETE FROM users WHERE id = \(user)")
            let owner = try await stack.postgres.query("SELECT user_id FROM subscriptions WHERE id = \(device.id)")
            #expect(try owner.first?.decode("user_id", as: String?.self) == .some(nil))
        }
    }

    @Test func bannedAndDisabledUsersAreSkipped() async throws {
        try await DeliveryStack.with { stack in
            let key = try await stack.apiKey()
            let banned = try await stack.user()
            let disabled = try await stack.user()
            let one = try await stack.device()
            let two = try await stack.device()
            #expect(try await stack.bind(one.id, secret: one.secret, user: banned, key: key).status == 204)
            #expect(try await stack.bind(two.id, secret: two.secret, user: disabled, key: key).status == 204)
            try await stack.postgres.execute("INSERT INTO user_bans (user_id) VALUES (\(banned))")
            try await stack.postgres.execute(
                "INSERT INTO app_user_disables (user_id, app_id) VALUES (\(disabled), \(stack.fixture.appID))")
            let answered = try await stack.send(
                [(one.id, DeliveryStack.payload), (two.id, DeliveryStack.payload)], key: key)
            #expect(statuses(answered) == ["skipped", "skipped"])
        }
    }

    /// Push turned off for the app (or an owner's plan without push): the send is
    /// refused as a whole, 403, as the spec rejects the app's pushes; nothing is queued.
    @Test func sendsOfAnAppWithPushOffAreRefused403() async throws {
        try await DeliveryStack.with { stack in
            let key = try await stack.apiKey()
            let device = try await stack.device()
            try await stack.postgres.execute("UPDATE apps SET push_enabled = false WHERE id = \(stack.fixture.appID)")
            try await CacheInvalidation(redis: stack.redis, keys: stack.keys).appChanged(stack.fixture.appID)
            let items = [device.id, "AAAAAAAAAAAAAAAAAAAAAA"].map {
                #"{"subscriptionId":"\#($0)","payload":"\#(DeliveryStack.payload)"}"#
            }
            let refused = try await stack.api(
                "POST", "/send", key: key, json: #"{"messages":["# + items.joined(separator: ",") + "]}")
            #expect(refused.status == 403)
            #expect(refused.text == #"{"error": "push is disabled for this app"}"#)
            // Also a batch none of whose messages would reach the queue.
            let unknown = #"{"subscriptionId":"AAAAAAAAAAAAAAAAAAAAAA","payload":"\#(DeliveryStack.payload)"}"#
            let invalid = #"{"subscriptionId":"\#(device.id)","payload":"!"}"#
            for batch in [unknown, invalid] {
                let whole = try await stack.api("POST", "/send", key: key, json: #"{"messages":[\#(batch)]}"#)
                #expect(whole.status == 403, "\(batch)")
            }
            #expect(try await stack.queuedMessages() == 0)
        }
    }

    @Test func anUninstalledDeviceIsGoneAndThenAbsentFromTheDeviceList() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let key = try await stack.apiKey()
            let user = try await stack.user()
            let device = try await stack.device()
            let kept = try await stack.device()
            #expect(try await stack.bind(device.id, secret: device.secret, user: user, key: key).status == 204)
            #expect(try await stack.bind(kept.id, secret: kept.secret, user: user, key: key).status == 204)
            #expect(try await stack.devices(user, key: key).count == 2)
            try await stack.controlRequest("POST", "/devices/\(device.token)/uninstall")
            let answered = try await stack.send(
                [(device.id, DeliveryStack.payload), (kept.id, DeliveryStack.payload)], key: key)
            #expect(statuses(answered) == ["gone", "sent"])
            let listed = try await stack.devices(user, key: key)
            #expect(listed.map { $0["id"] as? String } == [kept.id])
            // The worker records last_push_at in batches.
            try await eventually("lastPushAt set") {
                try await stack.devices(user, key: key).first?["lastPushAt"] is String
            }
            // Deleted, but its tombstone answers `gone` again to this app, and to no other.
            let again = try await stack.send([(device.id, DeliveryStack.payload)], key: key)
            #expect(statuses(again) == ["gone"])
            let other = try await Fixture.create(stack.postgres)
            let stranger = try await stack.send(
                [(device.id, DeliveryStack.payload)], key: try await stack.apiKey(app: other.appID))
            #expect(statuses(stranger) == ["not_found"])
        }
    }
}
