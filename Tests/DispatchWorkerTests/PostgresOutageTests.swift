import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// Postgres is the system of record but not on the per-push path: while this
/// stack's ingress and worker cannot reach it (through a relay the test cuts, so the
/// shared server and other suites are untouched), pushes to known devices are
/// still accepted and delivered, and what the worker owes Postgres is written once
/// it is back.
@Suite struct PostgresOutageTests {
    /// A stack whose worker reaches Postgres through a relay the test cuts or freezes
    /// (the shared server and the other suites untouched).
    static func withWorkerBehindRelay(
        _ overrides: [String: String] = [:], _ body: (DeliveryStack, WorkerApplication, TCPRelay) async throws -> Void
    ) async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await DeliveryStack.with { stack in
            let worker = try await stack.startWorker(overrides.merging(["DATABASE_URL": databaseURL]) { $1 })
            try await body(stack, worker, relay)
        }
    }

    /// A credential cache over `postgres` whose entries live 100 ms, holding the stack's credential key.
    static func credentialCache(
        _ stack: DeliveryStack, postgres: PostgresClient, failureLifetime: Duration = .seconds(10)
    ) throws -> CredentialCache {
        let sealer = try PushCredentialSealer(key: Array(Data(base64Encoded: stack.credentialKey)!))
        return CredentialCache(
            reader: PushCredentialReader(postgres: postgres, sealer: sealer), lifetime: .milliseconds(100),
            failureLifetime: failureLifetime, logger: Logger(component: "test", minimumLevel: .error))
    }

    /// A stack and a credential cache (`credentialCache`) that reads Postgres through a
    /// relay the test cuts or freezes.
    static func withCredentialCacheBehindRelay(
        failureLifetime: Duration = .seconds(10),
        _ body: (DeliveryStack, CredentialCache, TCPRelay) async throws -> Void
    ) async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await DeliveryStack.with { stack in
            let postgres = PostgresClient(url: databaseURL, applicationName: "pushgate-test-credentials")
            defer { postgres.close() }
            try await body(
                stack, try credentialCache(stack, postgres: postgres, failureLifetime: failureLifetime), relay)
        }
    }

    /// A credential APNs refuses while Postgres is away: the worker remembers the
    /// refusal, so the messages after it fail fast instead of each asking APNs (twice:
    /// the client renews its token and tries once more); the first message's retries
    /// write the refusal once Postgres is back.
    @Test func aRefusedCredentialIsNotAskedAgainWhilePostgresIsAway() async throws {
        let quickRetries = ["WORKER_RETRY_BASE_MS": "300", "WORKER_RETRY_CAP_MS": "300", "WORKER_MAX_ATTEMPTS": "100"]
        try await Self.withWorkerBehindRelay(quickRetries) { stack, worker, relay in
            let (id, _, token) = try await stack.subscribe()
            try await stack.enqueue(try await stack.message(subscription: id, token: token, reply: "read"))
            #expect(try await stack.awaitReply("read")["status"] == "sent")  // the credential read
            relay.cut()
            try await stack.controlRequest("POST", "/keys/\(stack.keyID)/revoke")
            func refusals() async throws -> Int {
                let stats = try await stack.controlRequest("GET", "/stats")
                let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
                return (json["rejected"] as? [String: Int])?["InvalidProviderToken"] ?? 0
            }
            try await stack.enqueue(try await stack.message(subscription: id, token: token, reply: "first"))
            try await eventually("the refusal's write retried") {
                worker.metrics.retries.value("outcome_not_written") >= 1
            }
            let asked = try await refusals()
            #expect(asked >= 1)
            for reply in ["second", "third"] {
                try await stack.enqueue(try await stack.message(subscription: id, token: token, reply: reply))
                let answer = try await stack.awaitReply(reply)
                #expect(answer["reason"] == "credential_rejected", "\(answer)")
            }
            #expect(try await refusals() == asked, "APNs asked again")
            relay.restore()
            let first = try await stack.awaitReply("first", timeout: 20)
            #expect(first["reason"] == "credential_rejected", "\(first)")
            let status = try await stack.postgres.query(
                "SELECT status FROM push_credentials WHERE id = \(stack.credentialID)"
            ).first?.decode("status", as: String.self)
            #expect(status == "rejected")
            #expect(try await refusals() == asked)
        }
    }

    @Test func pushesAreAcceptedAndDeliveredWithoutPostgresAndTheirCountsWrittenAfter() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await DeliveryStack.with(ingress: ["DATABASE_URL": databaseURL]) { stack in
            let worker = try await stack.startWorker(["DATABASE_URL": databaseURL])
            let device = try await stack.subscribe()
            #expect(try await stack.push(device.id).status == 201)
            try await eventually("the first push delivered and counted") {
                try await stack.dailyCounts().sent == 1
            }

            relay.cut()
            var statuses: [Int] = []
            for _ in 0..<20 { statuses.append(try await stack.push(device.id).status) }
            #expect(statuses.allSatisfy { $0 == 201 }, "\(statuses)")
            try await eventually("the pushes accepted without Postgres delivered") {
                stack.recordings(token: device.token).count == 21
            }
            let json = #"{"topic": "\#(stack.fixture.topic)", "token": "\#(Fixture.token())", "sandbox": false}"#
            let registration = try await stack.request("POST", "/api/push/v1/subscriptions", body: Array(json.utf8))
            #expect(registration.status == 503)
            #expect(registration.text == #"{"error": "1005 Storage error"}"#)

            // Moving the counts to Postgres now fails; they wait in Redis, not lost.
            #expect(await worker.counts.flush() == false)
            // Not ready by the plain probe; ready by the one that asks for Redis only.
            let operations = RawHTTPClient(port: worker.metricsPort)
            #expect(try await operations.request("GET", "/readyz").status == 503)
            #expect(try await operations.request("GET", "/readyz?exclude=postgres").status == 200)

            relay.restore()
            try await eventually("the daily counts written once Postgres is back") {
                try await stack.dailyCounts().sent == 21
            }
        }
    }

    /// A worker that never read the credential (started during the outage, say) cannot
    /// send until Postgres is back: its messages wait for it, without using their APNs
    /// attempts, and are delivered then — not failed after a few attempts Apple never saw.
    @Test func messagesAWorkerCannotSendForWantOfPostgresWaitForItWithoutUsingAttempts() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await DeliveryStack.with { stack in
            let device = try await stack.subscribe()
            relay.cut()
            let worker = try await stack.startWorker([
                "DATABASE_URL": databaseURL, "WORKER_MAX_ATTEMPTS": "2", "WORKER_RETRY_BASE_MS": "50",
                "WORKER_RETRY_CAP_MS": "200",
            ])
            for _ in 0..<3 { #expect(try await stack.push(device.id).status == 201) }
            try await eventually("the messages waiting for the credential") {
                worker.metrics.retries.value("database") >= 6
            }
            #expect(stack.recordings(token: device.token).isEmpty)
            #expect(try await stack.dailyCounts().failed == 0)

            relay.restore()
            try await eventually("the messages delivered once Postgres is back") {
                stack.recordings(token: device.token).count == 3
            }
            try await eventually("counted as sent") { try await stack.dailyCounts().sent == 3 }
            #expect(try await stack.dailyCounts().failed == 0)
        }
    }

    /// A credential with nothing read before to fall back on is asked for at most once
    /// per `unavailableLifetime` while Postgres refuses connections: its messages wait
    /// either way, and a read per message would only hammer Postgres.
    @Test func aCredentialPostgresCannotGiveIsAskedForAtMostOncePerLifetime() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        let postgres = PostgresClient(url: databaseURL, applicationName: "pushgate-test-credentials")
        defer { postgres.close() }
        let cache = CredentialCache(
            reader: PushCredentialReader(
                postgres: postgres, sealer: try PushCredentialSealer(key: Array(repeating: 7, count: 32))),
            unavailableLifetime: .seconds(2), logger: Logger(component: "test", minimumLevel: .error))
        relay.cut()
        let id = "never-read-\(UInt32.random(in: 0...UInt32.max))"
        guard case .unavailable = await cache.lookup(id) else {
            Issue.record("a credential Postgres cannot give should be unavailable")
            return
        }
        // The first read's connection attempts may still be arriving (libpq tries again
        // without SSL; a read past its wait goes on in the background): counted once
        // they settle, well within the lifetime and before the pause's first probe (1 s).
        var afterFirst = relay.connectionsAccepted
        for _ in 0..<10 {
            try await Task.sleep(for: .milliseconds(100))
            if relay.connectionsAccepted == afterFirst { break }
            afterFirst = relay.connectionsAccepted
        }
        #expect(afterFirst > 0, "the first lookup asked Postgres")
        for _ in 0..<20 {
            guard case .unavailable = await cache.lookup(id) else {
                Issue.record("still unavailable")
                return
            }
        }
        #expect(relay.connectionsAccepted == afterFirst, "not asked again within the lifetime")
        try await Task.sleep(for: .milliseconds(2100))
        _ = await cache.lookup(id)
        #expect(relay.connectionsAccepted > afterFirst, "asked again after it")
    }

    /// A read that does not answer (Postgres frozen) holds sends no longer than
    /// `CredentialCache.readWait`: the credential read before stays in use, one never
    /// read is unavailable (its messages wait and retry), and the read's answer is kept
    /// when it comes.
    @Test func aCredentialReadThatDoesNotAnswerHoldsSendsOnlyBriefly() async throws {
        try await Self.withCredentialCacheBehindRelay { stack, cache, relay in
            guard case .usable = await cache.lookup(stack.credentialID) else {
                Issue.record("the credential should be usable")
                return
            }
            relay.freeze()
            defer { relay.thaw() }
            try await Task.sleep(for: .milliseconds(150))  // past the entry's lifetime
            // (Bounded here too, so that a regression fails the test instead of hanging it.)
            let limit = Duration.seconds(10)
            let kept = try await withTimeLimit(limit) { await cache.lookup(stack.credentialID) }
            guard case .usable = kept else {
                Issue.record("the credential read before should stay in use")
                return
            }
            // The read still hangs: past its wait, it is not waited for again.
            let again = ContinuousClock.now
            let keptAgain = try await withTimeLimit(limit) { await cache.lookup(stack.credentialID) }
            guard case .usable = keptAgain else {
                Issue.record("the credential read before should stay in use")
                return
            }
            #expect(ContinuousClock.now - again < CredentialCache.readWait / 2)
            let never = "never-read-\(UInt32.random(in: 0...UInt32.max))"
            let unread = try await withTimeLimit(limit) { await cache.lookup(never) }
            guard case .unavailable = unread else {
                Issue.record("a credential never read should be unavailable")
                return
            }
        }
    }

    /// Once a read failed, a credential with an answer read before does not wait for
    /// the next reads (while Postgres stays away they fail too, each after its own
    /// wait): its sends go on at once with that answer until Postgres answers again. Here
    /// the client's only connection is held busy, so reads fail at its acquire timeout.
    @Test func afterAFailedReadSendsDoNotWaitForTheNextReads() async throws {
        try await DeliveryStack.with { stack in
            let postgres = PostgresClient(
                configuration: .init(
                    url: TestEnvironment.databaseURL, applicationName: "pushgate-test-credentials",
                    maximumConnections: 1, acquireTimeout: .seconds(1)))
            defer { postgres.close() }
            let cache = try Self.credentialCache(stack, postgres: postgres, failureLifetime: .milliseconds(100))
            guard case .usable = await cache.lookup(stack.credentialID) else {
                Issue.record("the credential should be usable")
                return
            }
            let busy = Task { try await postgres.query("SELECT pg_sleep(4)") }
            defer { busy.cancel() }
            try await Task.sleep(for: .milliseconds(150))  // past the entry's lifetime
            guard case .usable = await cache.lookup(stack.credentialID) else {  // fails after ~1 s
                Issue.record("the credential read before should stay in use")
                return
            }
            try await Task.sleep(for: .milliseconds(150))  // past the failure's lifetime
            let asked = ContinuousClock.now
            guard case .usable = await cache.lookup(stack.credentialID) else {
                Issue.record("the credential read before should stay in use")
                return
            }
            #expect(ContinuousClock.now - asked < .milliseconds(500), "not held by the next read")
            _ = try? await busy.value
        }
    }

    /// A credential's cache entry expiring while Postgres is away must not stop its
    /// sends: the credential read before stays in use until Postgres answers again.
    @Test func aCredentialReadBeforeStaysInUseWhilePostgresCannotBeRead() async throws {
        try await Self.withCredentialCacheBehindRelay(failureLifetime: .milliseconds(100)) { stack, cache, relay in
            guard case .usable(let read) = await cache.lookup(stack.credentialID) else {
                Issue.record("the credential should be usable")
                return
            }

            relay.cut()
            try await Task.sleep(for: .milliseconds(150))  // past the entry's lifetime
            guard case .usable(let kept) = await cache.lookup(stack.credentialID) else {
                Issue.record("the credential read before should stay in use")
                return
            }
            #expect(kept.keyID == read.keyID && kept.teamID == read.teamID)
            // One never read has nothing to fall back on: its messages are retried.
            guard case .unavailable = await cache.lookup("never-read-\(UInt32.random(in: 0...UInt32.max))") else {
                Issue.record("a credential never read should be unavailable")
                return
            }

            relay.restore()
            try await Task.sleep(for: .milliseconds(150))
            guard case .usable = await cache.lookup(stack.credentialID) else {
                Issue.record("the credential should be read again")
                return
            }
        }
    }

    /// Messages that waited go out unchecked while Postgres cannot be read, and the
    /// checks skip it meanwhile; they resume as soon as it answers again (a probe in
    /// the background), not after a fixed pause: a device deleted just after the outage
    /// gets none of the messages that waited for it.
    @Test func waitedChecksResumeAsSoonAsPostgresIsBack() async throws {
        try await Self.withWorkerBehindRelay { stack, worker, relay in
            let pause = try #require(worker.consumers.first).processor.retriedCheck.pause
            let kept = try await stack.subscribe()
            let deleted = try await stack.subscribe()
            #expect(try await stack.push(kept.id).status == 201)
            try await eventually("the credential read, a first push sent") {
                stack.recordings(token: kept.token).count == 1
            }

            relay.cut()
            let waited = try await stack.message(subscription: kept.id, token: kept.token, waited: true)
            try await stack.enqueue(waited)
            try await eventually("the message that waited sent unchecked") {
                stack.recordings(token: kept.token).count == 2
            }
            #expect(pause.isPaused)

            relay.restore()
            try await eventually("the checks resumed") { !pause.isPaused }
            try await stack.postgres.execute("DELETE FROM subscriptions WHERE id = \(deleted.id)")
            let late = try await stack.message(subscription: deleted.id, token: deleted.token, waited: true)
            try await stack.enqueue(late)
            try await eventually("the deleted device's message dropped") {
                worker.metrics.sends.value("discarded", "subscription_deleted") == 1
            }
            #expect(stack.recordings(token: deleted.token).isEmpty)
        }
    }

    /// While Postgres cannot be read, a message that waited for a subscription the
    /// worker already knows to be deleted (its revocation read before the outage) is
    /// dropped all the same; the others go out unchecked.
    @Test func aDeletionReadBeforeAnOutageStillDropsTheMessagesThatWaited() async throws {
        try await Self.withWorkerBehindRelay { stack, worker, relay in
            let kept = try await stack.subscribe()
            let deleted = try await stack.subscribe()
            try await stack.postgres.execute("DELETE FROM subscriptions WHERE id = \(deleted.id)")
            // A message that waited makes the worker read the revocations.
            let first = try await stack.message(subscription: kept.id, token: kept.token, waited: true)
            try await stack.enqueue(first)
            try await eventually("the first one sent") { stack.recordings(token: kept.token).count == 1 }

            relay.cut()
            try await Task.sleep(for: RevocationLog.refreshInterval * 2)
            let late = try await stack.message(subscription: deleted.id, token: deleted.token, waited: true)
            let other = try await stack.message(subscription: kept.id, token: kept.token, waited: true)
            try await stack.enqueue(late)
            try await stack.enqueue(other)
            try await eventually("the kept device's message sent unchecked") {
                stack.recordings(token: kept.token).count == 2
            }
            try await eventually("the deleted device's message dropped") {
                worker.metrics.sends.value("discarded", "subscription_deleted") == 1
            }
            #expect(stack.recordings(token: deleted.token).isEmpty)
            #expect(try #require(worker.consumers.first).processor.retriedCheck.pause.isPaused)
            relay.restore()
        }
    }

    /// A Postgres that neither answers nor refuses (frozen, or a network dropping
    /// everything) holds a message that waited no longer than the checks' read limit:
    /// it goes out unchecked and the checks pause, rather than it (and the in-flight
    /// permit it holds) waiting for as long as the freeze lasts.
    @Test func aFrozenPostgresHoldsAWaitedMessageOnlyForTheReadLimit() async throws {
        try await Self.withWorkerBehindRelay { stack, worker, relay in
            let pause = try #require(worker.consumers.first).processor.retriedCheck.pause
            let device = try await stack.subscribe()
            // A first one that waited: the credential read, the checks' connections open.
            let first = try await stack.message(subscription: device.id, token: device.token, waited: true)
            try await stack.enqueue(first)
            try await eventually("the first one checked and sent") {
                stack.recordings(token: device.token).count == 1 && worker.metrics.waitedChecks.value("log") == 1
            }

            relay.freeze()
            do {
                let waited = try await stack.message(subscription: device.id, token: device.token, waited: true)
                try await Task.sleep(for: RevocationLog.refreshInterval * 2)
                try await stack.enqueue(waited)
                try await eventually("the message that waited sent unchecked, Postgres still frozen") {
                    stack.recordings(token: device.token).count == 2
                }
                #expect(pause.isPaused)
            } catch {
                relay.thaw()  // else the worker's shutdown waits on the frozen reads
                throw error
            }

            relay.thaw()
            try await eventually("the checks resumed") { !pause.isPaused }
        }
    }

    /// An outcome whose Postgres write does not answer (a gone device's deletion, with
    /// Postgres frozen) holds its message's in-flight permit no longer than
    /// `OutcomeRecorder.writeWait`: the message is retried instead, and once Postgres
    /// answers the subscription is deleted all the same.
    @Test func anOutcomeWriteThatDoesNotAnswerIsRetriedInsteadOfHeld() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await DeliveryStack.with { stack in
            // The retry far off: it comes back after the test.
            let worker = try await stack.startWorker([
                "DATABASE_URL": databaseURL, "WORKER_RETRY_BASE_MS": "60000", "WORKER_RETRY_CAP_MS": "60000",
            ])
            let healthy = try await stack.subscribe()
            let gone = try await stack.subscribe()
            #expect(try await stack.push(healthy.id).status == 201)
            try await eventually("the credential read") { stack.recordings(token: healthy.token).count == 1 }
            try await stack.controlRequest("POST", "/devices/\(gone.token)/uninstall")

            relay.freeze()
            do {
                #expect(try await stack.push(gone.id).status == 201)
                // Put on the retry set, its permit released (the reader's own come and go).
                // (Within `OutcomeRecorder.writeWait` of APNs's answer; the first such test of a
                // run has been seen to take longer to get there, hence the loose limit.)
                try await eventually("the deletion given up on, the message retried", timeout: .seconds(40)) {
                    worker.metrics.retries.value("outcome_not_written") >= 1
                }
                #expect(try await stack.subscriptionExists(gone.id))
            } catch {
                relay.thaw()
                throw error
            }
            relay.thaw()
            // By the write given up on, which went on: the retry is a minute off.
            try await eventually("deleted once Postgres answers") { try await !stack.subscriptionExists(gone.id) }
        }
    }
}
