import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// What APNs answers changes our data: gone subscriptions, rejected credentials,
/// quota released for everything but sent, outcomes on reply lists.
@Suite struct OutcomeTests {
    @Test func unregisteredDeletesTheSubscriptionTheNextPushAnswers410AndTheQuotaIsUnchanged() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            try await stack.controlRequest("POST", "/devices/\(token)/uninstall")
            #expect(try await stack.quota() == 0)
            #expect(try await stack.push(id).status == 201)
            try await eventually("the subscription deleted") { try await !stack.subscriptionExists(id) }
            try await eventually("the entry acknowledged") { try await stack.streamLength() == 0 }
            #expect(try await stack.quota() == 0)
            let next = try await stack.push(id)
            #expect(next.status == 410)
            #expect(try await stack.quota() == 0)
            #expect(stack.recordings(token: token).isEmpty)
            try await eventually("the daily count") { try await stack.dailyCounts().gone == 1 }
        }
    }

    @Test func badDeviceTokenIsGoneAsWell() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, _) = try await stack.subscribe()
            // An odd number of hex digits: Apple (and the simulator) answer 400 BadDeviceToken.
            let bad = "abcdef0123456789abcdef0123456789a"
            try await stack.postgres.execute("UPDATE subscriptions SET device_token = \(bad) WHERE id = \(id)")
            try await stack.enqueue(try await stack.message(subscription: id, token: bad, reply: "bad"))
            #expect(try await stack.awaitReply("bad")["status"] == "gone")
            #expect(try await !stack.subscriptionExists(id))
            #expect(try await stack.redis.send("EXISTS", stack.keys.tombstone(id)).int == 1)
            #expect(try await stack.quota() == 0)
        }
    }

    /// Apple's commonest BadDeviceToken: a development build's token registered with
    /// `sandbox: false`, so sent to production. The subscription is gone (410 to its
    /// sender); the same token registered with `sandbox: true` is delivered.
    @Test func aTokenOfTheOtherEnvironmentIsBadDeviceTokenAndGone() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (wrong, _, token) = try await stack.subscribe(sandbox: false)
            let (right, _, _) = try await stack.subscribe(sandbox: true, token: token)
            // A sandbox token: the stack's sandbox URL is the simulator at 127.0.0.1.
            try await stack.controlRequest("PUT", "/devices/\(token)/environment", #"{"host":"127.0.0.1"}"#)
            #expect(try await stack.push(wrong).status == 201)
            try await eventually("the subscription deleted") { try await !stack.subscriptionExists(wrong) }
            #expect(try await stack.push(wrong).status == 410)
            #expect(try await stack.push(right).status == 201)
            try await eventually("the sandbox one delivered") { stack.recordings(token: token).count == 1 }
            #expect(try await stack.subscriptionExists(right))
            try await stack.controlRequest("DELETE", "/devices/\(token)")
        }
    }

    @Test func aTokenRefreshedAfterApplesVerdictIsKept() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            // Apple says the token died an hour ago; the device registered (PUT) since.
            let anHourAgo = Int64(Date().timeIntervalSince1970 * 1000) - 3_600_000
            try await stack.controlRequest("POST", "/devices/\(token)/uninstall", #"{"timestamp":\#(anHourAgo)}"#)
            let message = try await stack.message(subscription: id, token: token, reply: "kept")
            try await stack.enqueue(message)
            let reply = try await stack.awaitReply("kept")
            #expect(reply == ["mid": message.messageID, "status": "failed", "reason": "provider_error"])
            #expect(try await stack.subscriptionExists(id))
            #expect(try await stack.quota() == 0)
            #expect(try await stack.redis.send("EXISTS", stack.keys.tombstone(id)).int == 0)
        }
    }

    @Test func aTokenReplacedWhileTheMessageWaitedIsKept() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, oldToken) = try await stack.subscribe()
            try await stack.controlRequest("POST", "/devices/\(oldToken)/uninstall")
            try await stack.postgres.execute(
                "UPDATE subscriptions SET device_token = \(Fixture.token()) WHERE id = \(id)")
            try await stack.enqueue(try await stack.message(subscription: id, token: oldToken, reply: "replaced"))
            #expect(try await stack.awaitReply("replaced")["status"] == "failed")
            #expect(try await stack.subscriptionExists(id))
        }
    }

    /// A subscription its device deleted while a message to it was out: Apple's later
    /// verdict leaves no tombstone, so its push URL answers 404 (deleted), not 410.
    @Test func aSubscriptionDeletedMeanwhileGetsNoTombstone() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            let message = try await stack.message(subscription: id, token: token)
            try await stack.postgres.execute("DELETE FROM subscriptions WHERE id = \(id)")
            let result = try await SubscriptionRemover(postgres: stack.postgres).remove(
                message, unregisteredAt: nil, invalidation: CacheInvalidation(redis: stack.redis, keys: stack.keys))
            #expect(result == .removed)
            #expect(try await stack.redis.send("EXISTS", stack.keys.tombstone(id)).int == 0)
        }
    }

    /// BadDeviceToken most often means the wrong environment: a subscription whose
    /// `sandbox` a PUT corrected after the message was sent is kept, not deleted.
    @Test func aSubscriptionMovedToTheOtherEnvironmentMeanwhileIsKept() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            let message = try await stack.message(subscription: id, token: token)
            #expect(!message.sandbox)
            try await stack.postgres.execute("UPDATE subscriptions SET sandbox = true WHERE id = \(id)")
            let result = try await SubscriptionRemover(postgres: stack.postgres).remove(
                message, unregisteredAt: nil, invalidation: CacheInvalidation(redis: stack.redis, keys: stack.keys))
            #expect(result == .kept)
            #expect(try await stack.subscriptionExists(id))
        }
    }

    /// Redis does not roll back with Postgres: a tombstone written before a deletion
    /// that failed is withdrawn, so the device's push URL (its row still there) is not
    /// answered 410 for the tombstone's 30 days; the retry writes it again if due.
    @Test func aTombstoneWhoseDeletionFailedIsWithdrawn() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            let message = try await stack.message(subscription: id, token: token)
            let invalidation = CacheInvalidation(redis: stack.redis, keys: stack.keys)
            try await stack.withWritesRefused("DELETE", on: "subscriptions", id: id) { _ in
                await #expect(throws: (any Error).self) {
                    try await SubscriptionRemover(postgres: stack.postgres).remove(
                        message, unregisteredAt: nil, invalidation: invalidation)
                }
            }
            #expect(try await stack.subscriptionExists(id))
            #expect(try await stack.redis.send("EXISTS", stack.keys.tombstone(id)).int == 0)
            #expect(try await stack.push(id).status == 201)
        }
    }

    /// A retry that finds the device changed since Apple's verdict (a PUT with a new
    /// token) keeps the row and withdraws a tombstone an earlier try left (its
    /// withdrawal failed with Redis); another app's tombstone under the id is not its own.
    @Test func aRetryFindingTheDeviceChangedWithdrawsAnEarlierTombstone() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            let message = try await stack.message(subscription: id, token: token)
            let tombstone = stack.keys.tombstone(id)
            _ = try await stack.redis.send("SET", tombstone, message.appID, "EX", 3600)
            try await stack.postgres.execute(
                "UPDATE subscriptions SET device_token = \(Fixture.token()) WHERE id = \(id)")
            let remover = SubscriptionRemover(postgres: stack.postgres)
            let invalidation = CacheInvalidation(redis: stack.redis, keys: stack.keys)
            #expect(try await remover.remove(message, unregisteredAt: nil, invalidation: invalidation) == .kept)
            #expect(try await stack.redis.send("EXISTS", tombstone).int == 0)
            #expect(try await stack.push(id).status == 201)

            _ = try await stack.redis.send("SET", tombstone, "another-app", "EX", 3600)
            #expect(try await remover.remove(message, unregisteredAt: nil, invalidation: invalidation) == .kept)
            #expect(try await stack.redis.send("GET", tombstone) == .bulk(Array("another-app".utf8)))
            _ = try await stack.redis.send("DEL", tombstone)
        }
    }

    /// A credential already flagged (by another worker, or by an earlier try whose
    /// cache invalidation failed): its apps' cached entries are still dropped, so the
    /// ingress answers 502 at once instead of taking pushes until they age.
    @Test func anAlreadyFlaggedCredentialStillHasItsAppsCacheDropped() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, _) = try await stack.subscribe()
            #expect(try await stack.push(id).status == 201)  // the app's entry cached
            #expect(try await stack.redis.send("EXISTS", stack.keys.app(stack.fixture.appID)).int == 1)
            try await stack.postgres.execute(
                "UPDATE push_credentials SET status = 'rejected', rejected_at = now() WHERE id = \(stack.credentialID)")
            let invalidation = CacheInvalidation(redis: stack.redis, keys: stack.keys)
            let rejecter = CredentialRejecter(postgres: stack.postgres, workerID: "test-worker")
            let flagged = try await rejecter.reject(
                credentialID: stack.credentialID, reason: "APNs answered InvalidProviderToken",
                invalidation: invalidation)
            #expect(flagged.isEmpty, "flagged before this call")
            #expect(try await stack.redis.send("EXISTS", stack.keys.app(stack.fixture.appID)).int == 0)
            #expect(try await stack.push(id).status == 502)
            // The other messages that were in flight with it: no second round of work.
            #expect(try await stack.redis.send("EXISTS", stack.keys.app(stack.fixture.appID)).int == 1)
            try await rejecter.reject(
                credentialID: stack.credentialID, reason: "APNs answered InvalidProviderToken",
                invalidation: invalidation)
            #expect(try await stack.redis.send("EXISTS", stack.keys.app(stack.fixture.appID)).int == 1)
        }
    }

    /// A credential restored (`verify`) and refused again moments later is flagged
    /// again at once: the worker that flagged it the first time used to skip the flag
    /// for a minute, and meanwhile the ingress kept accepting pushes that all failed.
    @Test func aCredentialRestoredAndRefusedAgainIsFlaggedAgainAtOnce() async throws {
        try await DeliveryStack.with { stack in
            let invalidation = CacheInvalidation(redis: stack.redis, keys: stack.keys)
            let rejecter = CredentialRejecter(postgres: stack.postgres, workerID: "test-worker")
            func status() async throws -> String? {
                try await stack.postgres.query("SELECT status FROM push_credentials WHERE id = \(stack.credentialID)")
                    .first?.decode("status", as: String.self)
            }
            for round in 1...2 {
                let flagged = try await rejecter.reject(
                    credentialID: stack.credentialID, reason: "APNs answered InvalidProviderToken",
                    invalidation: invalidation)
                #expect(flagged == [stack.fixture.appID], "round \(round)")
                #expect(try await status() == "rejected")
                // What verify writes.
                try await stack.postgres.execute(
                    """
                    UPDATE push_credentials SET status = 'active', rejected_at = NULL, rejected_reason = NULL
                    WHERE id = \(stack.credentialID)
                    """)
            }
        }
    }

    /// Once the flag is written the refusal is settled, even if the apps' cached copies
    /// cannot be dropped yet (Redis away): that is left to the background retries, and
    /// the message is not sent to APNs again only to be refused again.
    @Test func aFlagWrittenWhileRedisIsAwayStillSettlesTheRefusal() async throws {
        try await DeliveryStack.with { stack in
            let (relay, relayedURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
            defer { relay.close() }
            let redis = try RedisClient(
                url: relayedURL,
                options: .init(connection: .init(connectTimeout: .seconds(1), commandTimeout: .seconds(1))))
            defer { redis.close() }
            relay.cut()
            let rejecter = CredentialRejecter(
                postgres: stack.postgres, workerID: "test-worker",
                logger: Logger(component: "test", minimumLevel: .error),
                invalidationRetryWindow: .seconds(1))
            let flagged = try await rejecter.reject(
                credentialID: stack.credentialID, reason: "APNs answered InvalidProviderToken",
                invalidation: CacheInvalidation(redis: redis, keys: stack.keys))
            #expect(flagged == [stack.fixture.appID])
            let status = try await stack.postgres.query(
                "SELECT status FROM push_credentials WHERE id = \(stack.credentialID)"
            ).first?.decode("status", as: String.self)
            #expect(status == "rejected")
        }
    }

    @Test func aRevokedKeyFlagsTheCredentialRejectedAndTheQuotaIsUnchanged() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, _) = try await stack.subscribe()
            try await stack.controlRequest("POST", "/keys/\(stack.keyID)/revoke")
            #expect(try await stack.push(id).status == 201)
            try await eventually("the credential flagged") {
                let rows = try await stack.postgres.query(
                    "SELECT status FROM push_credentials WHERE id = \(stack.credentialID)")
                return try rows.first?.decode("status", as: String.self) == "rejected"
            }
            let row = try #require(
                try await stack.postgres.query(
                    "SELECT rejected_at, rejected_reason FROM push_credentials WHERE id = \(stack.credentialID)"
                ).first)
            #expect(try row.decode("rejected_at", as: Date?.self) != nil)
            #expect(try row.decode("rejected_reason", as: String?.self) == "APNs answered InvalidProviderToken")
            // Recorded in the activity log, once, by the worker.
            let entries = try await stack.postgres.query(
                """
                SELECT account_id, actor, after ->> 'status' AS status, after ->> 'reason' AS reason
                FROM activity_log WHERE action = 'credential.rejected' AND subject = \("credential:\(stack.credentialID)")
                """)
            #expect(entries.count == 1)
            let entry = try #require(entries.first)
            #expect(try entry.decode("account_id", as: String?.self) == stack.fixture.accountID)
            #expect(try entry.decode("actor", as: String.self).hasPrefix("worker:worker-"))
            #expect(try entry.decode("status", as: String?.self) == "rejected")
            #expect(try entry.decode("reason", as: String?.self) == "APNs answered InvalidProviderToken")
            try await eventually("the entry acknowledged") { try await stack.streamLength() == 0 }
            #expect(try await stack.quota() == 0)
            // The app's cache was dropped: the ingress now answers 502 (1007).
            let next = try await stack.push(id)
            #expect(next.status == 502)
            // Messages already queued fail fast with credential_rejected.
            let (otherID, _, otherToken) = try await stack.subscribe()
            try await stack.enqueue(try await stack.message(subscription: otherID, token: otherToken, reply: "fast"))
            #expect(try await stack.awaitReply("fast")["reason"] == "credential_rejected")
            #expect(try await stack.quota() == 0)
        }
    }

    /// `POST /credentials/{id}/verify` restores a flagged credential and the ingress
    /// takes its pushes again: a worker that had read it rejected must send the
    /// messages accepted since, not fail them for the rest of its cache's minute.
    @Test func aRestoredCredentialSendsTheMessagesAcceptedAfterItsRejectionWasCached() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            try await stack.postgres.execute(
                "UPDATE push_credentials SET status = 'rejected', rejected_at = now() WHERE id = \(stack.credentialID)")
            try await stack.enqueue(try await stack.message(subscription: id, token: token, reply: "before"))
            #expect(try await stack.awaitReply("before")["reason"] == "credential_rejected")
            // What verify writes; then a message accepted after it, once the worker's
            // once-a-second recheck allows.
            try await stack.postgres.execute(
                """
                UPDATE push_credentials SET status = 'active', rejected_at = NULL, rejected_reason = NULL
                WHERE id = \(stack.credentialID)
                """)
            try await Task.sleep(for: .milliseconds(1100))
            try await stack.enqueue(try await stack.message(subscription: id, token: token, reply: "after"))
            #expect(try await stack.awaitReply("after")["status"] == "sent")
            #expect(stack.recordings(token: token).count == 1)
        }
    }

    @Test func repliesCarryTheOutcomeAndSentKeepsTheQuota() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            let message = try await stack.message(subscription: id, token: token, reply: "r1")
            try await stack.enqueue(message)
            #expect(try await stack.awaitReply("r1") == ["mid": message.messageID, "status": "sent", "reason": ""])
            #expect(try await stack.quota() == 1)
            // (The reply list's lifetime is checked in AcknowledgeScriptTests: here
            // awaitReply has popped it empty, and Redis deleted it.)
        }
    }

    @Test func aFormat1EntryStillInFlightFromAnOlderIngressIsSentAndAnswered() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            let message = try await stack.message(subscription: id, token: token, reply: "old")
            try await stack.enqueue(fields: message.legacyFields)
            #expect(try await stack.awaitReply("old") == ["mid": message.messageID, "status": "sent", "reason": ""])
            #expect(stack.recordings(token: token).count == 1)
        }
    }

    @Test func aMissingCredentialFailsWithCredentialMissingAndReleasesTheQuota() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            try await stack.enqueue(
                try await stack.message(subscription: id, token: token, credential: "nope", reply: "m"))
            #expect(try await stack.awaitReply("m")["reason"] == "credential_missing")
            try await eventually("the quota released") { try await stack.quota() == 0 }
            #expect(stack.recordings(token: token).isEmpty)
        }
    }

    @Test func anExpiredMessageIsDroppedUnsentAndCountedExpired() async throws {
        try await DeliveryStack.with { stack in
            let worker = try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            let expiration = Int64(Date().timeIntervalSince1970) - 10
            try await stack.enqueue(
                try await stack.message(subscription: id, token: token, expiration: expiration, reply: "x"))
            // The sender is told one of the spec's reasons; the metric keeps `expired`.
            let reply = try await stack.awaitReply("x")
            #expect(reply["status"] == "failed" && reply["reason"] == "provider_error")
            try await eventually("the quota released") { try await stack.quota() == 0 }
            #expect(stack.recordings(token: token).isEmpty)
            #expect(worker.metrics.sends.value("expired", "expired") == 1)

            // A release after its month's key expired (40 days on) does not make it again at -1.
            var late = try await stack.message(subscription: id, token: token, expiration: expiration, reply: "y")
            late.quotaKey = stack.keys.quota(account: stack.fixture.accountID, month: "190001")
            try await stack.enqueue(late)
            #expect(try await stack.awaitReply("y")["status"] == "failed")
            #expect(try await stack.redis.send("EXISTS", late.quotaKey).int == 0)
        }
    }

    @Test func anUnreadableEntryGoesToTheDeadLetterStreamWithItsReason() async throws {
        try await DeliveryStack.with { stack in
            // A dead letter from long ago (1970), past the lifetime dead letters are kept.
            _ = try await stack.redis.send("XADD", stack.keys.deadLetters, "1-0", "v", "4")
            try await stack.startWorker()
            try await stack.enqueue(fields: [Array("v".utf8), Array("9".utf8), Array("x".utf8), [0, 1, 2]])
            try await eventually("the dead letter") {
                let dead = try await stack.redis.send("XRANGE", stack.keys.deadLetters, "-", "+").array ?? []
                return dead.count == 1 && dead.first?.array?.first?.string != "1-0"
            }
            // The stream expires a lifetime (DEAD_LETTER_TTL_SECONDS, a day) after its newest entry.
            let ttl = try await stack.redis.send("TTL", stack.keys.deadLetters).int ?? -1
            #expect((86_400 - 60...86_400).contains(ttl))
            let dead = try await stack.redis.send("XRANGE", stack.keys.deadLetters, "-", "+")
            let fields = dead.array?.first?.array?.last?.array?.compactMap(\.string) ?? []
            let reason = fields.firstIndex(of: "dead_reason").map { fields[$0 + 1] }
            #expect(reason == "unreadable: queue message field v is not a known format version")
            #expect(try await stack.streamLength() == 0)
            #expect(try await stack.pendingCount() == 0)
        }
    }

    /// `dispatch-worker replay-dead-letters`: what no worker could read goes back on the
    /// stream for the workers running now (its messages were never sent nor settled);
    /// letters dead for other reasons stay, and one still unreadable is taken once.
    @Test func unreadableDeadLettersAreReplayedAndTheOthersKept() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            let message = try await stack.message(subscription: id, token: token, reply: "replayed")
            let unreadable = "unreadable: queue message field v is not a known format version"
            func deadLetter(_ fields: [[UInt8]], reason: String) async throws {
                let extra = [Array("dead_reason".utf8), Array(reason.utf8), Array("dead_at".utf8), Array("1".utf8)]
                _ = try await stack.redis.send(
                    argv: [Array("XADD".utf8), Array(stack.keys.deadLetters.utf8), Array("*".utf8)] + fields + extra)
            }
            try await deadLetter(message.fields, reason: unreadable)
            try await deadLetter([Array("v".utf8), Array("4".utf8)], reason: "handed out 6 times without an outcome")
            try await deadLetter([Array("v".utf8), Array("9".utf8)], reason: unreadable)

            let result = try await DeadLetterReplay.replay(
                stream: stack.keys.stream, redis: stack.redis, pageSize: 1)
            #expect(result == DeadLetterReplay.Result(replayed: 2, kept: 1))
            let reply = try await stack.awaitReply("replayed")
            #expect(reply == ["mid": message.messageID, "status": "sent", "reason": ""])
            #expect(stack.recordings(token: token).count == 1)
            // The kept letter, and the one still unreadable, dead-lettered again.
            try await eventually("the unreadable one back") {
                try await stack.streamLength(stack.keys.deadLetters) == 2
            }
            let dead = try await stack.redis.send("XRANGE", stack.keys.deadLetters, "-", "+").array ?? []
            let reasons = dead.map { entry -> String? in
                let fields = entry.array?.last?.array?.compactMap(\.string) ?? []
                return fields.firstIndex(of: "dead_reason").map { fields[$0 + 1] }
            }
            #expect(reasons == ["handed out 6 times without an outcome", unreadable])
        }
    }

    /// The command's own configuration: `REDIS_URL` and `WORKER_STREAMS` only.
    @Test func theReplayCommandReadsItsStreamsFromTheEnvironment() async throws {
        try await DeliveryStack.with { stack in
            let (logger, lines) = TestEnvironment.capturingLogger("worker")
            let status = await DeadLetterReplay.run(
                environment: Environment(["REDIS_URL": TestEnvironment.redisURL, "WORKER_STREAMS": stack.keys.stream]),
                logger: logger)
            #expect(status == 0)
            #expect(lines.all.contains { $0.contains("dead letters replayed") && $0.contains(stack.keys.stream) })
            #expect(await DeadLetterReplay.run(environment: Environment([:]), logger: logger) == 2)
        }
    }

    /// One entry of several messages (format 4, as the hot path writes them): each
    /// gets its own outcome, and the entry is acknowledged once, with all of them.
    @Test func eachMessageOfAnEntryGetsItsOwnOutcome() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker()
            let (sentID, _, sentToken) = try await stack.subscribe()
            let (goneID, _, goneToken) = try await stack.subscribe()
            let (expiredID, _, expiredToken) = try await stack.subscribe()
            try await stack.controlRequest("POST", "/devices/\(goneToken)/uninstall")
            let messages = [
                try await stack.message(subscription: sentID, token: sentToken, reply: "one"),
                try await stack.message(subscription: goneID, token: goneToken, reply: "two"),
                try await stack.message(subscription: expiredID, token: expiredToken, expiration: 1, reply: "three"),
                try await stack.message(subscription: sentID, token: sentToken, reply: "four"),
            ]
            try await stack.enqueue(fields: QueueMessage.batchFields(messages))
            #expect(
                try await stack.awaitReply("one") == ["mid": messages[0].messageID, "status": "sent", "reason": ""])
            #expect(try await stack.awaitReply("two")["status"] == "gone")
            #expect(
                try await stack.awaitReply("three") == [
                    "mid": messages[2].messageID, "status": "failed", "reason": "provider_error",
                ])
            #expect(try await stack.awaitReply("four")["status"] == "sent")
            try await eventually("the entry acknowledged") {
                let length = try await stack.streamLength()
                let pending = try await stack.pendingCount()
                return length == 0 && pending == 0
            }
            #expect(stack.recordings(token: sentToken).count == 2)
            #expect(stack.recordings(token: expiredToken).isEmpty)
            #expect(try await !stack.subscriptionExists(goneID))
            #expect(try await stack.quota() == 2)
            try await eventually("the daily counts") {
                let counts = try await stack.dailyCounts()
                return counts.sent == 2 && counts.failed == 1 && counts.gone == 1
            }
        }
    }

    /// A gone device whose deletion cannot be written (here a trigger refuses it) is
    /// retried alone; the other messages of its entry are done and not sent again, and
    /// the retries write APNs's answer rather than ask APNs again.
    @Test func anOutcomeThatCannotBeWrittenIsRetriedAloneAndItsEntryIsAcknowledged() async throws {
        try await DeliveryStack.with { stack in
            let worker = try await stack.startWorker(["WORKER_RETRY_BASE_MS": "300", "WORKER_RETRY_CAP_MS": "300"])
            let (healthyID, _, healthyToken) = try await stack.subscribe()
            let (goneID, _, goneToken) = try await stack.subscribe()
            try await stack.controlRequest("POST", "/devices/\(goneToken)/uninstall")
            try await stack.withWritesRefused("DELETE", on: "subscriptions", id: goneID) { allowWrites in
                let messages = [
                    try await stack.message(subscription: healthyID, token: healthyToken, reply: "healthy"),
                    try await stack.message(subscription: goneID, token: goneToken, reply: "gone"),
                ]
                try await stack.enqueue(fields: QueueMessage.batchFields(messages))
                // Answered while the other message still waits for its retry.
                #expect(try await stack.awaitReply("healthy")["status"] == "sent")
                try await eventually("the write retried a few times") {
                    worker.metrics.retries.value("outcome_not_written") >= 3
                }
                #expect(try await stack.subscriptionExists(goneID))
                try await allowWrites()
                #expect(try await stack.awaitReply("gone")["status"] == "gone")
                #expect(try await !stack.subscriptionExists(goneID))
                #expect(stack.recordings(token: healthyToken).count == 1)
                let stats = try await stack.controlRequest("GET", "/stats")
                let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
                #expect((json["rejected"] as? [String: Int])?["Unregistered"] == 1, "APNs asked once: \(stats.text)")
                try await eventually("the queue empty") {
                    let length = try await stack.streamLength()
                    let pending = try await stack.pendingCount()
                    return length == 0 && pending == 0
                }
                #expect(try await stack.quota() == 1)
            }
        }
    }
}
