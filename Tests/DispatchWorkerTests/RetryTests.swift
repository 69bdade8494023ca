import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import DispatchWorker

/// 429/5xx/connection failures go through the delayed-retry set with backoff; the
/// circuit flag goes up while APNs keeps failing and comes down on success.
@Suite struct RetryTests {
    @Test func aTwoSecond503StormDelaysButLosesNothing() async throws {
        try await DeliveryStack.with { stack in
            var ids: [(String, String)] = []
            for _ in 0..<20 {
                let (id, _, token) = try await stack.subscribe()
                #expect(try await stack.push(id).status == 201)
                ids.append((id, token))
            }
            try await stack.controlRequest("POST", "/faults", #"{"status":503,"count":1000000}"#)
            let worker = try await stack.startWorker(["WORKER_MAX_ATTEMPTS": "30"])
            try await Task.sleep(for: .seconds(2))
            #expect(stack.recordings().isEmpty)
            try await stack.controlRequest("DELETE", "/faults")
            try await eventually("all 20 delivered", timeout: .seconds(20)) { stack.recordings().count >= 20 }
            for (_, token) in ids { #expect(stack.recordings(token: token).count == 1) }
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(worker.metrics.retries.value("ServiceUnavailable") >= 20)
            #expect(try await stack.quota() == 20)
            #expect(try await stack.streamLength(stack.keys.deadLetters) == 0)
        }
    }

    /// A retried message whose subscription was deleted meanwhile (the device's DELETE,
    /// its bundle id or app removed) is not sent again: it is acknowledged, its quota
    /// released, counted nowhere.
    @Test func aRetryOfASubscriptionDeletedMeanwhileIsNotSent() async throws {
        try await DeliveryStack.with { stack in
            let (kept, _, keptToken) = try await stack.subscribe()
            let (deleted, _, deletedToken) = try await stack.subscribe()
            try await stack.controlRequest("POST", "/faults", #"{"status":503,"count":1000000}"#)
            let worker = try await stack.startWorker(["WORKER_RETRY_BASE_MS": "300", "WORKER_RETRY_CAP_MS": "300"])
            #expect(try await stack.push(kept).status == 201)
            #expect(try await stack.push(deleted).status == 201)
            try await eventually("both tried once") { worker.metrics.retries.value("ServiceUnavailable") >= 2 }
            try await stack.postgres.execute("DELETE FROM subscriptions WHERE id = \(deleted)")
            try await stack.controlRequest("DELETE", "/faults")
            try await eventually("the kept one delivered") { stack.recordings(token: keptToken).count == 1 }
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(stack.recordings(token: deletedToken).isEmpty)
            #expect(worker.metrics.sends.value("discarded", "subscription_deleted") == 1)
            #expect(try await stack.quota() == 1)
            #expect(try await stack.streamLength(stack.keys.deadLetters) == 0)
        }
    }

    /// A first attempt that waited (claimed from a dead worker, postponed) is checked
    /// too: in Postgres when a revocation mark concerns it (its device deleted itself),
    /// by the marks alone otherwise; a fresh one goes out without the check.
    @Test func aFirstAttemptThatWaitedForADeletedSubscriptionIsNotSent() async throws {
        try await DeliveryStack.with { stack in
            let (id, secret, token) = try await stack.subscribe()
            let (kept, _, keptToken) = try await stack.subscribe()
            let message = try await stack.message(subscription: id, token: token, waited: true)
            let keptMessage = try await stack.message(subscription: kept, token: keptToken, waited: true)
            let deletion = try await stack.request(
                "DELETE", "/api/push/v1/subscriptions/\(id)", headers: [("Authorization", "Bearer \(secret)")])
            #expect(deletion.status == 204)
            try await stack.enqueue(message)
            try await stack.enqueue(keptMessage)
            let fresh = try await stack.message(subscription: id, token: token)
            try await stack.enqueue(fresh)
            let worker = try await stack.startWorker()
            try await eventually("the fresh one and the kept one sent") {
                stack.recordings(token: token).count == 1 && stack.recordings(token: keptToken).count == 1
            }
            try await eventually("the one that waited dropped") {
                worker.metrics.sends.value("discarded", "subscription_deleted") == 1
            }
            #expect(stack.recordings(token: token).count == 1)
            #expect(worker.metrics.waitedChecks.value("lookup") == 1)
            #expect(worker.metrics.waitedChecks.value("log") == 1)
        }
    }

    /// Every change that revokes pushes is recorded by Postgres itself, in its own
    /// transaction, however it is made (here by hand): a subscription's deletion (one
    /// row each, an app's removal cascading included), an app's push switched off, an
    /// account's plan changed. Other changes record nothing.
    @Test func postgresRecordsEveryRevocation() async throws {
        try await DeliveryStack.with { stack in
            let (deleted, _, _) = try await stack.subscribe()
            let (kept, _, _) = try await stack.subscribe()
            let (app, account) = (stack.fixture.appID, stack.fixture.accountID)
            func revocations() async throws -> Set<String> {
                let rows = try await stack.postgres.query(
                    """
                    SELECT kind, id FROM revocations
                    WHERE id IN (\(deleted), \(kept), \(app), \(account)) AND at > now() - interval '1 minute'
                    """)
                return Set(
                    try rows.map { try $0.decode("kind", as: String.self) + ":" + $0.decode("id", as: String.self) })
            }
            try await stack.postgres.execute("UPDATE subscriptions SET last_seen_at = now() WHERE id = \(kept)")
            try await stack.postgres.execute("UPDATE apps SET push_enabled = true WHERE id = \(app)")
            try await stack.postgres.execute("UPDATE accounts SET name = 'renamed' WHERE id = \(account)")
            #expect(try await revocations().isEmpty)

            try await stack.postgres.execute("DELETE FROM subscriptions WHERE id = \(deleted)")
            try await stack.postgres.execute("UPDATE apps SET push_enabled = false WHERE id = \(app)")
            try await stack.postgres.execute("UPDATE accounts SET plan = 'lite' WHERE id = \(account)")
            #expect(try await revocations() == ["sub:\(deleted)", "app:\(app)", "acct:\(account)"])
            try await stack.postgres.execute("DELETE FROM apps WHERE id = \(app)")
            #expect(try await revocations() == ["sub:\(deleted)", "sub:\(kept)", "app:\(app)", "acct:\(account)"])
        }
    }

    /// A revocation that is read between two messages of a backlog applies to the
    /// second: the worker reads the recent revocations afresh (every 25 ms at
    /// most) as waited messages arrive, not once.
    @Test func aRevocationWhileABacklogDrainsStopsTheRestOfIt() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            let worker = try await stack.startWorker()
            let first = try await stack.message(subscription: id, token: token, waited: true)
            try await stack.enqueue(first)
            try await eventually("the first sent") { stack.recordings(token: token).count == 1 }
            try await stack.postgres.execute("DELETE FROM subscriptions WHERE id = \(id)")
            try await Task.sleep(for: .milliseconds(300))
            let second = try await stack.message(subscription: id, token: token, waited: true)
            try await stack.enqueue(second)
            try await eventually("the second dropped") {
                worker.metrics.sends.value("discarded", "subscription_deleted") == 1
            }
            #expect(stack.recordings(token: token).count == 1)
        }
    }

    /// The revocation log misses no revocation whose transaction commits after a later
    /// one was read: each read takes the rows from the oldest transaction still open at
    /// the read before. On a database of its own, with revocations written directly: a
    /// transaction held open on the shared database's `subscriptions` would block
    /// another suite's DDL on that table, and everything queued behind it (the suite
    /// once hung so).
    @Test func aRevocationCommittedAfterALaterOneIsReadAllTheSame() async throws {
        let database = try await ScratchDatabase.create("revocations")
        let postgres = PostgresClient(url: database.url, maximumConnections: 2)
        try await Migrator(logger: Logger(component: "test", minimumLevel: .warning)).migrate(postgres)
        let log = RevocationLog(postgres: postgres)
        let owners = [("slow", "app", "account"), ("fast", "app", "account")]
        var failure: (any Error)?
        do {
            #expect(try await log.concerns(owners) == [false, false])
            let inserting = AsyncStream<Void>.makeStream()
            let committing = AsyncStream<Void>.makeStream()
            // Ends the held transaction whatever happens below.
            defer { committing.continuation.finish() }
            let slowRevocation = Task {
                try await postgres.withTransaction { connection in
                    try await connection.execute("INSERT INTO revocations (kind, id) VALUES ('sub', 'slow')")
                    inserting.continuation.yield()
                    for await _ in committing.stream { break }
                }
            }
            for await _ in inserting.stream { break }
            try await postgres.execute("INSERT INTO revocations (kind, id) VALUES ('sub', 'fast')")
            try await Task.sleep(for: RevocationLog.refreshInterval)
            #expect(try await log.concerns(owners) == [false, true])
            committing.continuation.yield()
            try await slowRevocation.value
            try await Task.sleep(for: RevocationLog.refreshInterval)
            #expect(try await log.concerns(owners) == [true, true])
        } catch {
            failure = error
        }
        postgres.close()
        try await database.drop()
        if let failure { throw failure }
    }

    /// Past its capacity (a sweep deleting very many subscriptions at once) the log
    /// holds nothing and every message counts as concerned, so each is looked up.
    @Test func aRevocationLogPastItsCapacityCountsEveryMessageConcerned() async throws {
        try await DeliveryStack.with { stack in
            var ids: [String] = []
            for _ in 0..<3 { ids.append(try await stack.subscribe().id) }
            let (unrelated, _, _) = try await stack.subscribe()
            try await stack.postgres.execute("DELETE FROM subscriptions WHERE id = ANY(\(ids))")
            // (Other suites' revocations in the shared database may fill it sooner.)
            let log = RevocationLog(postgres: stack.postgres, capacity: 2)
            let owner = (unrelated, stack.fixture.appID, stack.fixture.accountID)
            #expect(try await log.concerns([owner]) == [true])
            #expect(try await RevocationLog(postgres: stack.postgres).concerns([owner]) == [false])
        }
    }

    /// While no worker runs (a restart, a deploy), the device deletes itself through its
    /// endpoint and another app's push is switched off: once a worker reads their queued
    /// pushes, neither goes out (nor counts against the quota); a third device's does.
    @Test func pushesQueuedWhileNoWorkerRanAreDroppedForADeletedDeviceOrAnAppSwitchedOff() async throws {
        try await DeliveryStack.with { stack in
            let (deleted, secret, deletedToken) = try await stack.subscribe()
            let (kept, _, keptToken) = try await stack.subscribe()
            #expect(try await stack.push(deleted).status == 201)
            #expect(try await stack.push(kept).status == 201)
            let deletion = try await stack.request(
                "DELETE", "/api/push/v1/subscriptions/\(deleted)", headers: [("Authorization", "Bearer \(secret)")])
            #expect(deletion.status == 204)
            // About as long as a worker's restart: the pushes waited that long.
            try await Task.sleep(for: .milliseconds(2_100))

            let worker = try await stack.startWorker()
            try await eventually("the kept device's push sent") { stack.recordings(token: keptToken).count == 1 }
            try await eventually("the deleted device's dropped") {
                worker.metrics.sends.value("discarded", "subscription_deleted") == 1
            }
            #expect(stack.recordings(token: deletedToken).isEmpty)
            try await eventually("its quota given back") { try await stack.quota() == 1 }

            await worker.shutdown()
            #expect(try await stack.push(kept).status == 201)
            // By hand: recorded as a revocation all the same (a trigger).
            try await stack.postgres.execute("UPDATE apps SET push_enabled = false WHERE id = \(stack.fixture.appID)")
            try await Task.sleep(for: .milliseconds(2_100))
            let next = try await stack.startWorker()
            try await eventually("the switched-off app's push dropped") {
                next.metrics.sends.value("discarded", "push_disabled") == 1
            }
            #expect(stack.recordings(token: keptToken).count == 1)
            try await eventually("its quota given back") { try await stack.quota() == 1 }
        }
    }

    /// So is a retry of an app whose push was switched off meanwhile.
    @Test func aRetryOfAnAppSwitchedOffMeanwhileIsNotSent() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            try await stack.controlRequest("POST", "/faults", #"{"status":503,"count":1000000}"#)
            let worker = try await stack.startWorker(["WORKER_RETRY_BASE_MS": "300", "WORKER_RETRY_CAP_MS": "300"])
            #expect(try await stack.push(id).status == 201)
            try await eventually("tried once") { worker.metrics.retries.value("ServiceUnavailable") >= 1 }
            try await stack.postgres.execute("UPDATE apps SET push_enabled = false WHERE id = \(stack.fixture.appID)")
            try await stack.controlRequest("DELETE", "/faults")
            try await eventually("dropped") { worker.metrics.sends.value("discarded", "push_disabled") == 1 }
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(stack.recordings(token: token).isEmpty)
            #expect(try await stack.quota() == 0)
        }
    }

    /// RFC 8030 §5.4: a newer message of a topic replaces an outstanding one. A retry
    /// must not overtake it: APNs would show the older one last (the topic is its
    /// collapse id). Another topic's newer message does not replace it.
    @Test func aRetryIsDroppedOnceANewerMessageOfItsTopicWasQueued() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            let (otherID, _, otherToken) = try await stack.subscribe()
            let worker = try await stack.startWorker(["WORKER_RETRY_BASE_MS": "1000", "WORKER_RETRY_CAP_MS": "1000"])
            try await stack.controlRequest("POST", "/faults", #"{"status":503,"count":2}"#)
            let inbox = Fixture.pushHeaders + [("Topic", "inbox")]
            let (older, newer) = (Fixture.message(), Fixture.message())
            #expect(try await stack.push(id, body: older, headers: inbox).status == 201)
            #expect(try await stack.push(otherID, body: older, headers: inbox).status == 201)
            try await eventually("both failed once") { worker.metrics.retries.value("ServiceUnavailable") >= 2 }
            #expect(try await stack.push(id, body: newer, headers: inbox).status == 201)
            #expect(try await stack.push(id, headers: Fixture.pushHeaders + [("Topic", "calendar")]).status == 201)
            try await eventually("the older one's retry dropped") {
                worker.metrics.sends.value("discarded", "topic_replaced") == 1
            }
            try await eventually("the queue empty") { try await stack.isDrained() }
            let delivered = stack.recordings(token: token).map { String(decoding: $0.payload, as: UTF8.self) }
            #expect(delivered.count == 2)
            #expect(delivered.contains { $0.contains(Base64URL.encode(newer)) })
            #expect(!delivered.contains { $0.contains(Base64URL.encode(older)) })
            // The other subscription's retry of the same topic was not replaced.
            try await eventually("the other subscription's retry sent") {
                stack.recordings(token: otherToken).count == 1
            }
            #expect(try await stack.quota() == 3)
        }
    }

    /// Two messages of one topic queued before a worker reads them: only the newer goes
    /// out (RFC 8030 §5.4), whatever the order they are read and sent in.
    @Test func ofTwoQueuedMessagesOfATopicOnlyTheNewerIsSent() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            let inbox = Fixture.pushHeaders + [("Topic", "inbox")]
            let (older, newer) = (Fixture.message(), Fixture.message())
            #expect(try await stack.push(id, body: older, headers: inbox).status == 201)
            #expect(try await stack.push(id, body: newer, headers: inbox).status == 201)
            let worker = try await stack.startWorker()
            try await eventually("the older one dropped") {
                worker.metrics.sends.value("discarded", "topic_replaced") == 1
            }
            try await eventually("the newer one sent") { stack.recordings(token: token).count == 1 }
            let payload = String(decoding: try #require(stack.recordings(token: token).first).payload, as: UTF8.self)
            #expect(payload.contains(Base64URL.encode(newer)))
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(stack.recordings(token: token).count == 1)
            #expect(try await stack.quota() == 1)
        }
    }

    /// Pushes of one topic in quick succession, while APNs answers slowly over several
    /// connections: the device's last notification of the topic is the newest push
    /// (one message of a topic at a time on its way, `TopicGate`). Without the gate an
    /// older one overtook the newest in about one run in six.
    @Test func aBurstOfOneTopicEndsWithTheNewestOnTheDevice() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":50}"#)
            let worker = try await stack.startWorker()
            let inbox = Fixture.pushHeaders + [("Topic", "inbox")]
            var newest: [UInt8] = []
            for _ in 0..<20 {
                newest = Fixture.message()
                #expect(try await stack.push(id, body: newest, headers: inbox).status == 201)
            }
            try await eventually("the queue empty") { try await stack.isDrained() }
            let last = try #require(stack.recordings(token: token).last)
            #expect(String(decoding: last.payload, as: UTF8.self).contains(Base64URL.encode(newest)))
            // Each either reached APNs or was replaced, none twice.
            let replaced = Int(worker.metrics.sends.value("discarded", "topic_replaced"))
            #expect(stack.recordings(token: token).count + replaced == 20)
        }
    }

    /// Starts a worker and pushes two messages of topic `inbox` to `subscription`, APNs
    /// answering in `latency` ms: the first on its way, the second held behind it (its
    /// marks read).
    static func holdTheSecondOfTwoOfATopic(_ stack: DeliveryStack, subscription id: String, latency: Int) async throws
        -> WorkerApplication
    {
        try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":\#(latency)}"#)
        let worker = try await stack.startWorker()
        let inbox = Fixture.pushHeaders + [("Topic", "inbox")]
        let gate = try #require(worker.consumers.first).processor.topicGate
        #expect(try await stack.push(id, headers: inbox).status == 201)
        // Past its marks before the second's are written (else the second replaces it).
        try await eventually("the first one on its way") { gate.counts.onTheirWay == 1 }
        #expect(try await stack.push(id, headers: inbox).status == 201)
        try await eventually("the second one held, its marks read") { gate.counts.waiting == 1 }
        return worker
    }

    /// A message held behind its topic's message in flight is not sent once a newer
    /// message of its topic was queued meanwhile through another way (another worker's
    /// stream, say): the marks are read again when the hold ends. Here the newer one's
    /// mark is written as the ingress writes it, so no worker of this test reads it.
    @Test func aHeldMessageIsDroppedWhenANewerOneOfItsTopicWasQueuedWhileItWaited() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            let worker = try await Self.holdTheSecondOfTwoOfATopic(stack, subscription: id, latency: 600)
            #expect(worker.metrics.sends.value("discarded", "topic_replaced") == 0)
            let later = Int64(Date().timeIntervalSince1970 * 1000) + 1
            _ = try await stack.redis.send("HSET", stack.keys.topicMarks(id), "inbox", "elsewhere:\(later)")
            try await eventually("the held one replaced") {
                worker.metrics.sends.value("discarded", "topic_replaced") == 1
            }
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(stack.recordings(token: token).count == 1)
        }
    }

    /// An entry handed out before (its worker crashed with it on its way and came back
    /// under its name at once) is checked however fresh its message: the device
    /// deleted itself in between.
    @Test func anEntryTakenBackAfterACrashIsCheckedHoweverFresh() async throws {
        try await DeliveryStack.with { stack in
            let (id, secret, token) = try await stack.subscribe()
            let name = "crashed-\(UInt32.random(in: 0...UInt32.max))"
            try await stack.enqueue(try await stack.message(subscription: id, token: token))
            try await stack.handOut(to: name)
            let deletion = try await stack.request(
                "DELETE", "/api/push/v1/subscriptions/\(id)", headers: [("Authorization", "Bearer \(secret)")])
            #expect(deletion.status == 204)
            let worker = try await stack.startWorker(["WORKER_ID": name])
            try await eventually("the message taken back dropped") {
                worker.metrics.sends.value("discarded", "subscription_deleted") == 1
            }
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(stack.recordings(token: token).isEmpty)
            #expect(worker.metrics.waitedChecks.value("lookup") == 1)
        }
    }

    /// A message held behind the one of its topic in flight has waited too: when it is
    /// released it is checked like any other, and not sent if its device deleted itself
    /// meanwhile.
    @Test func aHeldMessageWhoseDeviceWasDeletedWhileItWaitedIsNotSent() async throws {
        try await DeliveryStack.with { stack in
            let (id, secret, token) = try await stack.subscribe()
            let worker = try await Self.holdTheSecondOfTwoOfATopic(stack, subscription: id, latency: 3000)
            let deletion = try await stack.request(
                "DELETE", "/api/push/v1/subscriptions/\(id)", headers: [("Authorization", "Bearer \(secret)")])
            #expect(deletion.status == 204)
            try await eventually("the held one dropped") {
                worker.metrics.sends.value("discarded", "subscription_deleted") == 1
            }
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(stack.recordings(token: token).count == 1)
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":0}"#)
        }
    }

    /// A worker whose `CREDENTIAL_KEY` is not the one the credentials were sealed with
    /// (a deployment mistake) leaves their messages waiting instead of failing them as
    /// `credential_missing`: a worker with the right key sends them.
    @Test func aWorkerWithTheWrongCredentialKeyLeavesMessagesWaiting() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            #expect(try await stack.push(id).status == 201)
            let wrong = try await stack.startWorker([
                "CREDENTIAL_KEY": Data(SecureRandom.bytes(32)).base64EncodedString()
            ])
            try await eventually("postponed") { wrong.metrics.retries.value("credential_key") >= 1 }
            #expect(wrong.metrics.sends.value("failed", "credential_missing") == 0)
            await wrong.shutdown(deadline: .seconds(2))
            #expect(stack.recordings(token: token).isEmpty)
            let right = try await stack.startWorker()
            try await eventually("sent with the right key") { stack.recordings(token: token).count == 1 }
            #expect(right.metrics.sends.value("failed", "credential_missing") == 0)
        }
    }

    @Test func tooManyRequestsIsRetriedAfterABackoff() async throws {
        try await DeliveryStack.with { stack in
            let worker = try await stack.startWorker(["WORKER_RETRY_BASE_MS": "1000", "WORKER_RETRY_CAP_MS": "1000"])
            let (id, _, token) = try await stack.subscribe()
            // Warm the connection, so the measured time is the backoff.
            #expect(try await stack.push(id).status == 201)
            try await eventually("the first notification") { stack.recordings(token: token).count == 1 }
            try await stack.controlRequest("POST", "/faults", #"{"status":429,"count":1}"#)
            let start = ContinuousClock.now
            #expect(try await stack.push(id).status == 201)
            try await eventually("the retried notification") { stack.recordings(token: token).count == 2 }
            // Equal jitter: at least half the 1 s delay.
            #expect(ContinuousClock.now - start >= .milliseconds(500))
            #expect(worker.metrics.retries.value("TooManyRequests") == 1)
        }
    }

    /// A message of an entry that must be retried goes to the delayed-retry set as a
    /// message of its own when the entry is acknowledged; the others are done.
    @Test func aRetriedMessageLeavesItsEntryAndComesBackAlone() async throws {
        try await DeliveryStack.with { stack in
            let worker = try await stack.startWorker(["WORKER_RETRY_BASE_MS": "200", "WORKER_RETRY_CAP_MS": "200"])
            var messages: [QueueMessage] = []
            for index in 0..<3 {
                let (id, _, token) = try await stack.subscribe()
                messages.append(try await stack.message(subscription: id, token: token, reply: "r\(index)"))
            }
            try await stack.controlRequest("POST", "/faults", #"{"status":429,"count":1}"#)
            try await stack.enqueue(fields: QueueMessage.batchFields(messages))
            for index in 0..<3 {
                let reply = try await stack.awaitReply("r\(index)")
                #expect(reply == ["mid": messages[index].messageID, "status": "sent", "reason": ""])
            }
            for message in messages { #expect(stack.recordings(token: message.deviceToken).count == 1) }
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(worker.metrics.retries.value("TooManyRequests") == 1)
            #expect(try await stack.quota() == 3)
            for index in 0..<3 { #expect(try await stack.redis.send("LLEN", stack.keys.reply("r\(index)")).int == 0) }
        }
    }

    @Test func attemptsAreBoundedThenTheMessageFailsWithProviderError() async throws {
        try await DeliveryStack.with { stack in
            try await stack.startWorker(["WORKER_MAX_ATTEMPTS": "3", "WORKER_RETRY_BASE_MS": "50"])
            try await stack.controlRequest("POST", "/faults", #"{"status":500,"count":1000000}"#)
            let (id, _, token) = try await stack.subscribe()
            try await stack.enqueue(try await stack.message(subscription: id, token: token, reply: "bounded"))
            let reply = try await stack.awaitReply("bounded")
            #expect(reply["status"] == "failed")
            #expect(reply["reason"] == "provider_error")
            #expect(try await stack.quota() == 0)
            let stats = try await stack.controlRequest("GET", "/stats")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
            #expect(json["faultsInjected"] as? Int == 3)
        }
    }

    @Test func theCircuitFlagRisesWhileAPNsFailsAndClearsOnTheNextSuccess() async throws {
        try await DeliveryStack.with { stack in
            let circuit = stack.keys.circuit(credential: stack.credentialID, environment: "production")
            var subscriptions: [String] = []
            for _ in 0..<3 {
                let (id, _, _) = try await stack.subscribe()
                subscriptions.append(id)
                #expect(try await stack.push(id).status == 201)
            }
            try await stack.controlRequest("POST", "/faults", #"{"status":503,"count":1000000}"#)
            try await stack.startWorker(["WORKER_CIRCUIT_THRESHOLD": "3", "WORKER_MAX_ATTEMPTS": "50"])
            try await eventually("the circuit flag") { try await stack.redis.send("EXISTS", circuit).int == 1 }
            let ttl = try await stack.redis.send("TTL", circuit).int ?? 0
            #expect(ttl > 0 && ttl <= 30)
            // The ingress reads it: 502 (1007) instead of queueing.
            let refused = try await stack.push(subscriptions[0])
            #expect(refused.status == 502)
            try await stack.controlRequest("DELETE", "/faults")
            try await eventually("the flag cleared", timeout: .seconds(20)) {
                try await stack.redis.send("EXISTS", circuit).int == 0
            }
            try await eventually("the 3 delivered") { stack.recordings().count == 3 }
        }
    }

    /// A worker stopped (SIGTERM) while it holds the flag takes it down on its way out
    /// and does not raise it again from its last sends' failures: a peer that still
    /// fails would raise it again, but no flag of the stopped one outlives it.
    @Test func aStoppingWorkerTakesDownTheFlagItHolds() async throws {
        try await DeliveryStack.with { stack in
            let circuit = stack.keys.circuit(credential: stack.credentialID, environment: "production")
            let (id, _, _) = try await stack.subscribe()
            for _ in 0..<3 { #expect(try await stack.push(id).status == 201) }
            try await stack.controlRequest("POST", "/faults", #"{"status":503,"count":1000000}"#)
            let worker = try await stack.startWorker(["WORKER_CIRCUIT_THRESHOLD": "3", "WORKER_MAX_ATTEMPTS": "50"])
            try await eventually("the circuit flag") { try await stack.redis.send("EXISTS", circuit).int == 1 }
            #expect(try await stack.push(id).status == 502)
            await worker.shutdown(deadline: .seconds(1))
            #expect(try await stack.redis.send("EXISTS", circuit).int == 0)
            #expect(try await stack.push(id).status == 201, "queued for the next worker, not refused")
        }
    }

    /// A worker restarted while its predecessor's flag is up: its first delivery for
    /// that credential clears the flag, instead of the ingress answering 502 for the
    /// rest of the flag's lifetime while APNs takes notifications again.
    @Test func aFlagLeftByAStoppedWorkerIsClearedByTheNextWorkersFirstDelivery() async throws {
        try await DeliveryStack.with { stack in
            let circuit = stack.keys.circuit(credential: stack.credentialID, environment: "production")
            let (id, _, _) = try await stack.subscribe()
            #expect(try await stack.push(id).status == 201)
            _ = try await stack.redis.send("SET", circuit, "1", "EX", 300)
            #expect(try await stack.push(id).status == 502)
            try await stack.startWorker()
            try await eventually("the queued push delivered") { stack.recordings().count == 1 }
            try await eventually("the flag cleared") { try await stack.redis.send("EXISTS", circuit).int == 0 }
            #expect(try await stack.push(id).status == 201)
        }
    }
}
