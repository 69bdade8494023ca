import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator

/// Many notifications at once: the stream limit (1 until a token is accepted,
/// then raised) is used and respected, and GOAWAY in the middle of 20,000 loses
/// and duplicates none. Evidence comes from the simulator's counters and
/// recordings, not from timing.
@Suite(.serialized) struct ClientLoadTests {
    /// The simulator raises the limit to 20 here and holds each answer 100 ms, so
    /// at least 20 streams are open at some moment if the client uses the raised
    /// limit. nghttp2 on the simulator refuses (REFUSED_STREAM) a second stream
    /// before the raise and breaks the connection for one beyond 20 after it; the
    /// client would count a retry or a connection failure.
    @Test func theClientUsesTheRaisedStreamLimitAndNeverExceedsIt() async throws {
        try await Simulator.with({ $0.maxConcurrentStreams = 20 }) { simulator, client in
            #expect(try await simulator.control("PUT", "/latency", #"{"milliseconds":100}"#).0 == 204)
            let credential = Teams.credential()
            let results = await client.sendAll(
                (0..<200).map { _ in Teams.notification() }, credential: credential, environment: simulator.environment)
            #expect(results.count == 200)
            #expect(failureSummary(results) == [:])
            let stats = try await simulator.stats()
            #expect(stats.peakOpenStreams == 20)
            #expect(stats.connectionsOpened == 1)
            #expect(stats.accepted == 200)
            let metrics = client.metrics
            #expect(metrics.retriedAfterRefusal == 0)
            #expect(metrics.connectionFailures == 0)
            #expect(metrics.connectionsClosed == 0)
        }
    }

    @Test func twentyThousandOverFourConnectionsWithGoAwayInTheMiddleLoseNoneAndDuplicateNone() async throws {
        let count = 20_000
        try await Simulator.with(
            { $0.maxRecordedNotifications = 30_000 },
            client: {
                $0.connectionsPerPool = 4
                $0.queueCapacity = count
                $0.requestTimeout = .seconds(120)
            }
        ) { simulator, client in
            // Answers held 5 ms, so streams are in flight on every connection when GOAWAY comes.
            #expect(try await simulator.control("PUT", "/latency", #"{"milliseconds":5}"#).0 == 204)
            let credential = Teams.credential()
            let notifications = (0..<count).map { _ in Teams.notification() }
            async let sent = client.sendAll(notifications, credential: credential, environment: simulator.environment)
            // GOAWAY (last-stream-id = the last one processed, as Apple sends it) once a
            // quarter is through, on the 4 connections then open.
            while simulator.state.counters.accepted < count / 4 {
                try await Task.sleep(for: .milliseconds(5))
            }
            let (status, json) = try await simulator.control("POST", "/goaway")
            #expect(status == 200)
            // Normally 4. Under the full parallel test load, 2 runs in about 15 saw a 5th
            // (one connection replaced before the GOAWAY; not yet explained, see the report).
            let atGoAway = json["connections"] as? Int ?? 0
            #expect(atGoAway >= 4)
            let results = await sent

            #expect(results.count == count)
            #expect(failureSummary(results) == [:])
            // The simulator recorded each apns-id exactly once, and exactly the client's.
            let recorded = simulator.state.recordings().compactMap { UUID(uuidString: $0.apnsID) }
            let unique = Set(recorded)
            #expect(recorded.count == count)
            #expect(unique.count == count)
            #expect(unique == Set(results.keys))
            let stats = try await simulator.stats()
            #expect(stats.accepted == count)
            #expect(stats.rejected.isEmpty)
            // The connections GOAWAY reached, each replaced at most once (4 at a time).
            #expect(stats.connectionsOpened > atGoAway && stats.connectionsOpened <= atGoAway + 4)
            #expect(stats.peakOpenStreams > 1 && stats.peakOpenStreams <= 500)
            let metrics = client.metrics
            #expect(metrics.retriedAfterRefusal == 0)
            #expect(metrics.timeouts == 0 && metrics.overloaded == 0)
            print(
                "20,000 with GOAWAY: connections \(stats.connectionsOpened), peak streams \(stats.peakOpenStreams), "
                    + "retried after GOAWAY \(metrics.retriedAfterGoAway); \(metrics); \(stats.json)")
        }
    }

    /// GOAWAY claiming only stream 1 was processed: every stream in flight is
    /// refused by the simulator (never recorded) and must be sent again elsewhere.
    /// 2,000 over 2 connections, answers held 200 ms, GOAWAY after the first 100.
    @Test func goAwayThatRefusesEveryStreamInFlightLosesNoneAndDuplicatesNone() async throws {
        let count = 2_000
        try await Simulator.with(
            client: {
                $0.connectionsPerPool = 2
                $0.requestTimeout = .seconds(60)
            }
        ) { simulator, client in
            #expect(try await simulator.control("PUT", "/latency", #"{"milliseconds":200}"#).0 == 204)
            let credential = Teams.credential()
            async let sent = client.sendAll(
                (0..<count).map { _ in Teams.notification() }, credential: credential,
                environment: simulator.environment)
            while simulator.state.counters.accepted < 100 {
                try await Task.sleep(for: .milliseconds(5))
            }
            let (status, _) = try await simulator.control("POST", "/goaway", #"{"lastStreamId":1}"#)
            #expect(status == 200)
            let results = await sent
            #expect(failureSummary(results) == [:])
            let recorded = simulator.state.recordings().compactMap { UUID(uuidString: $0.apnsID) }
            #expect(recorded.count == count)
            #expect(Set(recorded) == Set(results.keys))
            let stats = try await simulator.stats()
            // The simulator resets the held streams (REFUSED_STREAM) just before its GOAWAY;
            // the client sends those again on the refusal path, the rest on the GOAWAY path.
            let metrics = client.metrics
            #expect(stats.streamsRefusedAfterGoAway > 0)
            #expect(metrics.retriedAfterGoAway + metrics.retriedAfterRefusal >= stats.streamsRefusedAfterGoAway)
            #expect(stats.accepted == count)
        }
    }

    /// Apple may say why it closes a connection in the GOAWAY's debug data: the reason
    /// reaches the operator's log (a plain GOAWAY is only logged at info).
    @Test func aGoAwayReasonIsLogged() async throws {
        try await Simulator.with { simulator, _ in
            let (logger, lines) = TestEnvironment.capturingLogger("apns")
            let client = try APNsClient(
                configuration: APNsClient.Configuration(connectionsPerPool: 1, caFile: simulator.caFile),
                tokens: InMemoryProviderTokenStore(), logger: logger)
            let credential = Teams.credential()
            #expect(
                try await client.send(Teams.notification(), credential: credential, environment: simulator.environment)
                    .status == 200)
            let (status, _) = try await simulator.control("POST", "/goaway", #"{"reason":"BadCertificateEnvironment"}"#)
            #expect(status == 200)
            let logged = try await Poll.until(timeout: .seconds(10)) {
                lines.all.contains {
                    $0.contains("received GOAWAY from APNs") && $0.contains("BadCertificateEnvironment")
                }
            }
            #expect(logged)
            await client.shutdown()
        }
    }
}
