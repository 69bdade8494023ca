import CShims
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Shared

/// The client against a real HTTP/2 server over TLS (`APNsTestServer`).
@Suite(.serialized) struct APNsClientTests {
    static let deviceToken = String(repeating: "ab", count: 32)

    let credential: APNsCredential

    init() throws {
        credential = APNsCredential(
            id: "cred-1", teamID: "TEAM123456", keyID: "KEY1234567", privateKey: try .generate())
    }

    func notification(_ id: UUID = UUID()) -> APNsNotification {
        APNsNotification(
            deviceToken: Self.deviceToken, topic: "com.example.app", apnsID: id,
            payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
    }

    func makeClient(
        _ server: APNsTestServer?, tokens: any ProviderTokenStore = InMemoryProviderTokenStore(),
        _ adjust: (inout APNsClient.Configuration) -> Void = { _ in }
    ) throws -> APNsClient {
        var configuration = APNsClient.Configuration(caFile: server?.certificates.caFile)
        adjust(&configuration)
        return try APNsClient(
            configuration: configuration, tokens: tokens, logger: Logger(component: "test", minimumLevel: .error))
    }

    /// Sends `count` notifications at once; returns each one's outcome by apns-id.
    func sendAll(
        _ count: Int, client: APNsClient, environment: APNsEnvironment
    ) async -> [UUID: Result<APNsResponse, APNsClientError>] {
        await withTaskGroup(of: (UUID, Result<APNsResponse, APNsClientError>).self) { group in
            for _ in 0..<count {
                let id = UUID()
                let notification = notification(id)
                let credential = credential
                group.addTask {
                    do {
                        return (
                            id,
                            .success(
                                try await client.send(notification, credential: credential, environment: environment))
                        )
                    } catch {
                        return (id, .failure(error as! APNsClientError))
                    }
                }
            }
            var results: [UUID: Result<APNsResponse, APNsClientError>] = [:]
            for await (id, result) in group { results[id] = result }
            return results
        }
    }

    func expectAllSucceeded(_ results: [UUID: Result<APNsResponse, APNsClientError>], count: Int) {
        #expect(results.count == count)
        var failures: [String: Int] = [:]
        for (id, result) in results {
            switch result {
            case .success(let response):
                if response.status != 200 || response.apnsID != id { failures["\(response)", default: 0] += 1 }
            case .failure(let error):
                failures[error.description, default: 0] += 1
            }
        }
        #expect(failures.isEmpty, "\(failures)")
    }

    // MARK: Load, limits, retries

    @Test func twentyThousandNotificationsOverFourConnectionsStayWithinTheAdvertisedStreamLimit() async throws {
        let server = try await APNsTestServer.start(initialMaxStreams: 1, raisedMaxStreams: 100)
        defer { server.stop() }
        let client = try makeClient(server) {
            $0.connectionsPerPool = 4
            $0.queueCapacity = 20_000
            $0.requestTimeout = .seconds(120)
        }
        let results = await sendAll(20_000, client: client, environment: server.environment)
        expectAllSucceeded(results, count: 20_000)
        let stats = try await server.stats()
        #expect(stats.connectionsAccepted == 4)
        #expect(stats.requests == 20_000)
        #expect(stats.limitViolations == 0)
        #expect(stats.maxOpenStreams <= 100)
        #expect(stats.maxOpenStreams > 1, "the raised limit was used")
        #expect(stats.answered.count == 20_000 && stats.answered.values.allSatisfy { $0 == 1 })
        #expect(stats.authorizations.count == 1, "one provider token shared by every connection")
        await client.shutdown()
    }

    @Test func goAwayInTheMiddleOfLoadLosesNoneAndDuplicatesNone() async throws {
        let server = try await APNsTestServer.start(initialMaxStreams: 1, raisedMaxStreams: 50) { $0.goAwayAfter = 700 }
        defer { server.stop() }
        let client = try makeClient(server) {
            $0.connectionsPerPool = 4
            $0.requestTimeout = .seconds(60)
        }
        let results = await sendAll(6_000, client: client, environment: server.environment)
        expectAllSucceeded(results, count: 6_000)
        let stats = try await server.stats()
        #expect(stats.goAwaysSent >= 4)
        #expect(stats.connectionsAccepted > 4, "replacements opened")
        #expect(stats.answered.count == 6_000)
        #expect(stats.answered.values.allSatisfy { $0 == 1 }, "no notification answered twice")
        #expect(stats.limitViolations == 0)
        #expect(client.metrics.retriedAfterGoAway > 0)
        #expect(client.metrics.connectionFailures == 0)
        await client.shutdown()
    }

    @Test func refusedStreamsAreRetried() async throws {
        let server = try await APNsTestServer.start { server in
            // Every request's first attempt is refused.
            server.decide = { $0.attempt == 0 ? .refuse : .ok }
        }
        defer { server.stop() }
        let client = try makeClient(server)
        let results = await sendAll(300, client: client, environment: server.environment)
        expectAllSucceeded(results, count: 300)
        let stats = try await server.stats()
        #expect(stats.refused == 300)
        #expect(stats.requests == 600)
        #expect(stats.answered.count == 300 && stats.answered.values.allSatisfy { $0 == 1 })
        #expect(client.metrics.retriedAfterRefusal == 300)
        await client.shutdown()
    }

    @Test func expiredProviderTokenIsRefreshedOnceAndTheRequestRetried() async throws {
        let clock = Mutex<TimeInterval>(1_700_000_000)
        let tokens = InMemoryProviderTokenStore(now: { Date(timeIntervalSince1970: clock.withLock { $0 }) })
        let first = try await tokens.token(for: credential)
        clock.withLock { $0 += 30 * 60 }  // 30 minutes old: still used, but APNs calls it expired
        let server = try await APNsTestServer.start { server in
            server.decide = { request in
                request.authorization == "bearer \(first)"
                    ? .respond(status: 403, body: #"{"reason":"ExpiredProviderToken"}"#) : .ok
            }
        }
        defer { server.stop() }
        let client = try makeClient(server, tokens: tokens)
        let id = UUID()
        let response = try await client.send(notification(id), credential: credential, environment: server.environment)
        #expect(response.status == 200)
        #expect(response.apnsID == id)
        #expect(tokens.signedCount == 2)
        #expect(client.metrics.providerTokenRefreshes == 1)
        // Later sends use the new token without another refresh.
        let again = try await client.send(notification(), credential: credential, environment: server.environment)
        #expect(again.status == 200)
        let stats = try await server.stats()
        #expect(stats.requests == 3)
        #expect(stats.authorizations["bearer \(first)"] == 1)
        #expect(tokens.signedCount == 2)
        await client.shutdown()
    }

    @Test func aTokenRejectedTooSoonIsNotRefreshedAndTheAnswerReturned() async throws {
        let tokens = InMemoryProviderTokenStore()
        let server = try await APNsTestServer.start { server in
            server.decide = { _ in .respond(status: 403, body: #"{"reason":"ExpiredProviderToken"}"#) }
        }
        defer { server.stop() }
        let client = try makeClient(server, tokens: tokens)
        let response = try await client.send(notification(), credential: credential, environment: server.environment)
        #expect(response.status == 403)
        #expect(response.reason == .expiredProviderToken)
        #expect(tokens.signedCount == 1)
        #expect(try await server.stats().requests == 1)
        await client.shutdown()
    }

    /// A store that cannot be reached is our outage, not the credential's: a typed
    /// error a worker retries later, and nothing reaches APNs.
    @Test func aTokenStoreThatCannotBeReachedFailsWithTheStoresOwnError() async throws {
        let redis = try RedisClient(url: "redis://127.0.0.1:\(try UnusedPort.loopback())/0")
        let server = try await APNsTestServer.start()
        defer { server.stop() }
        let client = try makeClient(server, tokens: RedisProviderTokenStore(redis: redis))
        await #expect {
            try await client.send(notification(), credential: credential, environment: server.environment)
        } throws: { ($0 as? APNsClientError)?.code == .providerTokenStore }
        #expect(try await server.stats().requests == 0)
        await client.shutdown()
        redis.close()
    }

    @Test func errorAnswersArriveAsTypedReasons() async throws {
        let server = try await APNsTestServer.start { server in
            server.decide = { request in
                switch request.headers["apns-topic"] {
                case "gone": .respond(status: 410, body: #"{"reason":"Unregistered","timestamp":1700000000000}"#)
                case "bad-token": .respond(status: 403, body: #"{"reason":"InvalidProviderToken"}"#)
                case "new": .respond(status: 400, body: #"{"reason":"SomethingNew"}"#)
                default: .ok
                }
            }
        }
        defer { server.stop() }
        let client = try makeClient(server)
        func send(topic: String) async throws -> APNsResponse {
            var notification = notification()
            notification.topic = topic
            return try await client.send(notification, credential: credential, environment: server.environment)
        }
        let gone = try await send(topic: "gone")
        #expect(gone.status == 410)
        #expect(gone.reason == .unregistered(timestamp: Date(timeIntervalSince1970: 1_700_000_000)))
        let rejected = try await send(topic: "bad-token")
        #expect(rejected.status == 403 && rejected.reason == .invalidProviderToken)
        let unknown = try await send(topic: "new")
        #expect(unknown.status == 400 && unknown.reason == .unknown("SomethingNew"))
        let ok = try await send(topic: "com.example.app")
        #expect(ok.status == 200 && ok.reason == nil)
        await client.shutdown()
    }

    // MARK: Failures

    @Test func aServerCertificateFromAnUnknownCAIsRefusedWithATypedError() async throws {
        let server = try await APNsTestServer.start()
        defer { server.stop() }
        let client = try makeClient(nil)  // system CAs only: the test CA is unknown
        let error = await #expect(throws: APNsClientError.self) {
            try await client.send(notification(), credential: credential, environment: server.environment)
        }
        #expect(error?.code == .untrustedServer)
        #expect((error?.underlying as? TLSError)?.code == .certificateVerification)
        #expect(try await server.stats().requests == 0)
        await client.shutdown()
    }

    @Test func aDeadServerIsRetriedWithBackoffNotInATightLoop() async throws {
        let loop = EventLoop(name: "dead-server")
        defer { loop.shutdown() }
        let attempts = Mutex<[ContinuousClock.Instant]>([])
        let listener = try await loop.submit {
            UncheckedBox(
                try TCPListener(address: ListenAddress(host: "127.0.0.1", port: 0), loop: loop) { fd in
                    attempts.withLock { $0.append(.now) }
                    close(fd)  // accepts and hangs up: no TLS, no HTTP/2
                })
        }
        let environment = APNsEnvironment(name: "dead", host: "localhost", port: listener.value.port)
        let client = try makeClient(nil) {
            $0.backoff = ReconnectBackoff(initial: .milliseconds(100), maximum: .milliseconds(400))
            $0.requestTimeout = .seconds(5)
        }
        let started = ContinuousClock.now
        var errors: [APNsClientError.Code] = []
        while ContinuousClock.now - started < .milliseconds(2500) {
            do {
                _ = try await client.send(notification(), credential: credential, environment: environment)
            } catch let error as APNsClientError {
                errors.append(error.code)
            }
        }
        let times = attempts.withLock { $0 }
        // Delays of ~[50-100, 100-200, 200-400, 200-400…] ms: about 7-12 attempts in 2.5 s.
        #expect(times.count >= 4 && times.count <= 16, "\(times.count) attempts")
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 >= .milliseconds(45) }, "\(gaps)")
        #expect(errors.allSatisfy { $0 == .connection }, "\(errors)")
        #expect(client.metrics.connectionFailures == times.count)
        await client.shutdown()
        try await loop.submit { listener.value.close() }
    }

    @Test func aFullQueueFailsFastWithOverloaded() async throws {
        let server = try await APNsTestServer.start(initialMaxStreams: 1, raisedMaxStreams: nil) { server in
            server.decide = { _ in .ignore }  // never answers: one stream stays busy
        }
        defer { server.stop() }
        let client = try makeClient(server) {
            $0.connectionsPerPool = 1
            $0.queueCapacity = 3
            $0.requestTimeout = .seconds(30)
        }
        let environment = server.environment
        let credential = credential
        func startSend() -> Task<APNsClientError.Code?, Never> {
            let notification = notification()
            return Task {
                do {
                    _ = try await client.send(notification, credential: credential, environment: environment)
                    return nil
                } catch {
                    return (error as? APNsClientError)?.code
                }
            }
        }
        // One in flight (the server has it)…
        var waiting = [startSend()]
        while try await server.stats().requests < 1 { try await Task.sleep(for: .milliseconds(10)) }
        // …three queued behind it…
        waiting += (0..<3).map { _ in startSend() }
        try await Task.sleep(for: .milliseconds(200))
        #expect(client.metrics.overloaded == 0)
        let started = ContinuousClock.now
        let error = await #expect(throws: APNsClientError.self) {
            try await client.send(notification(), credential: credential, environment: environment)
        }
        #expect(error?.code == .overloaded)
        #expect(ContinuousClock.now - started < .seconds(1))
        #expect(client.metrics.overloaded == 1)
        // Shutdown resolves every waiting send exactly once.
        await client.shutdown(deadline: .milliseconds(200))
        for task in waiting { #expect(await task.value == .shutdown) }
    }

    @Test func aRequestWithoutAnswerTimesOut() async throws {
        let server = try await APNsTestServer.start { $0.decide = { _ in .ignore } }
        defer { server.stop() }
        let client = try makeClient(server) { $0.requestTimeout = .milliseconds(300) }
        let started = ContinuousClock.now
        let error = await #expect(throws: APNsClientError.self) {
            try await client.send(notification(), credential: credential, environment: server.environment)
        }
        #expect(error?.code == .timeout)
        #expect(ContinuousClock.now - started < .seconds(2))
        await client.shutdown()
    }

    @Test func aConnectionThatStopsAnsweringPingsIsReplaced() async throws {
        let server = try await APNsTestServer.start()
        defer { server.stop() }
        let client = try makeClient(server) {
            $0.idlePingInterval = .milliseconds(100)
            $0.pingTimeout = .milliseconds(300)
        }
        #expect(
            try await client.send(notification(), credential: credential, environment: server.environment).status == 200
        )
        // Freeze the server's loop: no PING acknowledgements for a while.
        server.loop.execute { usleep(1_000_000) }
        try await Task.sleep(for: .milliseconds(1200))
        #expect(client.metrics.pingTimeouts >= 1)
        #expect(
            try await client.send(notification(), credential: credential, environment: server.environment).status == 200
        )
        #expect(try await server.stats().connectionsAccepted == 2)
        await client.shutdown()
    }

    // MARK: Shutdown

    @Test func shutdownLetsInFlightRequestsFinishThenRefusesNewOnes() async throws {
        let server = try await APNsTestServer.start { $0.answerDelay = .milliseconds(300) }
        defer { server.stop() }
        let client = try makeClient(server)
        let environment = server.environment
        let pending = Task { await sendAll(20, client: client, environment: environment) }
        while try await server.stats().requests < 1 { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(100))  // every send handed over; the first answer is 300 ms away
        await client.shutdown(deadline: .seconds(10))
        expectAllSucceeded(await pending.value, count: 20)
        let error = await #expect(throws: APNsClientError.self) {
            try await client.send(notification(), credential: credential, environment: environment)
        }
        #expect(error?.code == .shutdown)
    }
}
