import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator

/// The simulator over real TLS + HTTP/2, with `Shared.HTTP2Connection` as the client.
@Suite struct SimulatorEndToEndTests {
    @Test func aValidNotificationIsAcceptedAndRecordedExactly() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        let headers = Fixtures.headers(["apns-collapse-id": "thread-1", "apns-priority": "5"])
        let sentAt = Int64(Date().timeIntervalSince1970 * 1_000_000)
        let response = try await client.request(headers)
        let answeredAt = Int64(Date().timeIntervalSince1970 * 1_000_000)
        #expect(response.status == 200)
        #expect(response.headers["apns-id"] == "123E4567-E89B-12D3-A456-426614174000")
        #expect(response.body.isEmpty)

        let (status, json) = try await simulator.controlRequest("GET", "/notifications")
        #expect(status == 200)
        let notifications = try #require(json["notifications"] as? [[String: Any]])
        try #require(notifications.count == 1)
        let recorded = notifications[0]
        #expect(recorded["deviceToken"] as? String == Fixtures.deviceToken)
        #expect(recorded["topic"] as? String == Fixtures.bundleID)
        #expect(recorded["teamId"] as? String == Fixtures.teamID)
        #expect(recorded["keyId"] as? String == Fixtures.keyID)
        #expect(recorded["apnsId"] as? String == "123E4567-E89B-12D3-A456-426614174000")
        let receivedAtUs = try #require((recorded["receivedAtUs"] as? NSNumber)?.int64Value)
        #expect((sentAt...answeredAt).contains(receivedAtUs))
        #expect((recorded["receivedAt"] as? NSNumber)?.int64Value == receivedAtUs / 1000)
        let recordedHeaders = try #require(recorded["headers"] as? [String: String])
        let sent = Dictionary(
            uniqueKeysWithValues: headers.filter { $0.name != "authorization" }.map { ($0.name, $0.value) })
        #expect(recordedHeaders == sent)
        let payload = try #require(recorded["payload"] as? [String: Any])
        let expected = try #require(try JSONSerialization.jsonObject(with: Data(Fixtures.payload)) as? [String: Any])
        #expect(NSDictionary(dictionary: payload).isEqual(to: expected))
    }

    @Test func withoutAnAPNsIDTheResponseCarriesAFreshOne() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        let response = try await client.request(Fixtures.headers(["apns-id": nil]))
        #expect(response.status == 200)
        #expect(UUID(uuidString: response.headers["apns-id"] ?? "") != nil)
    }

    @Test func theStreamLimitIsOneUntilATokenIsAcceptedThenRaised() async throws {
        let simulator = try await RunningSimulator.start(Fixtures.configuration(maxConcurrentStreams: 321))
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        try await client.wait("the server's first SETTINGS") { $0.maxStreamsSeen == [1] }
        let rejected = try await client.request(Fixtures.headers(token: "bad.token.here"))
        #expect(rejected.status == 403)
        #expect(rejected.reason == "InvalidProviderToken")
        #expect(try await client.read { $0.maxStreamsSeen } == [1])

        let accepted = try await client.request(Fixtures.headers())
        #expect(accepted.status == 200)
        try await client.wait("the raised limit") { $0.maxStreamsSeen == [1, 321] }
        // And the raised limit is usable: 100 requests at once all succeed.
        var ids: [Int32] = []
        for index in 0..<100 { ids.append(try await client.send(Fixtures.headers(["apns-collapse-id": "c\(index)"]))) }
        for id in ids { #expect(try await client.response(id).status == 200) }
    }

    @Test func aTokenOlderThanAnHourIsExpiredProviderToken() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        let old = Fixtures.token(issuedAt: Date().addingTimeInterval(-3700))
        let response = try await client.request(Fixtures.headers(token: old))
        #expect(response.status == 403)
        #expect(response.reason == "ExpiredProviderToken")
        #expect(String(decoding: response.body, as: UTF8.self) == #"{"reason":"ExpiredProviderToken"}"#)
    }

    @Test func aSecondTokenOnAConnectionWithinThePeriodIsTooManyProviderTokenUpdates() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        let first = Fixtures.token(issuedAt: Date().addingTimeInterval(-5))
        let second = Fixtures.token()
        #expect(try await client.request(Fixtures.headers(token: first)).status == 200)
        let refused = try await client.request(Fixtures.headers(token: second))
        #expect(refused.status == 429)
        #expect(refused.reason == "TooManyProviderTokenUpdates")
        // The same token again is fine, and another connection may use the new one.
        #expect(try await client.request(Fixtures.headers(token: first)).status == 200)
        let other = try await simulator.connect()
        #expect(try await other.request(Fixtures.headers(token: second)).status == 200)
    }

    @Test func aShortenedUpdatePeriodLetsTheConnectionSwitchTokens() async throws {
        let simulator = try await RunningSimulator.start(Fixtures.configuration(tokenUpdatePeriodSeconds: 1))
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        #expect(
            try await client.request(Fixtures.headers(token: Fixtures.token(issuedAt: Date().addingTimeInterval(-5))))
                .status == 200)
        try await Task.sleep(for: .milliseconds(2100))
        #expect(try await client.request(Fixtures.headers(token: Fixtures.token())).status == 200)
    }

    @Test func eachTokenIsVerifiedOncePerConnection() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let token = Fixtures.token()
        for _ in 0..<2 {
            let client = try await simulator.connect()
            for _ in 0..<20 { #expect(try await client.request(Fixtures.headers(token: token)).status == 200) }
        }
        let (_, stats) = try await simulator.controlRequest("GET", "/stats")
        #expect(stats["accepted"] as? Int == 40)
        let tokens = try #require(stats["providerTokens"] as? [String: Int])
        #expect(tokens == ["seen": 1, "verifications": 2])
        #expect((stats["connections"] as? [String: Int])?["opened"] == 2)
    }

    @Test func injectedFaultsAnswerTheNextRequests() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        #expect(try await client.request(Fixtures.headers()).status == 200)
        #expect(try await simulator.controlRequest("POST", "/faults", #"{"status":503,"count":2}"#).0 == 204)
        #expect(try await simulator.controlRequest("POST", "/faults", #"{"status":429}"#).0 == 204)
        #expect(try await simulator.controlRequest("POST", "/faults", #"{"status":404}"#).0 == 400)
        var answers: [String] = []
        for _ in 0..<4 {
            let response = try await client.request(Fixtures.headers())
            answers.append("\(response.status) \(response.reason ?? "")")
        }
        #expect(answers == ["503 ServiceUnavailable", "503 ServiceUnavailable", "429 TooManyRequests", "200 "])
        let (_, stats) = try await simulator.controlRequest("GET", "/stats")
        #expect(stats["rejected"] as? [String: Int] == ["ServiceUnavailable": 2, "TooManyRequests": 1])
        #expect(stats["accepted"] as? Int == 2)
    }

    @Test func goAwayReachesEveryConnection() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let first = try await simulator.connect()
        let second = try await simulator.connect()
        #expect(try await first.request(Fixtures.headers()).status == 200)
        let (status, json) = try await simulator.controlRequest("POST", "/goaway")
        #expect(status == 200)
        #expect(json["connections"] as? Int == 2)
        try await first.wait("GOAWAY") { $0.goAway != nil }
        try await second.wait("GOAWAY") { $0.goAway != nil }
        #expect(try await first.read { $0.goAway?.lastStreamID } == 1)
        #expect(try await second.read { $0.goAway?.lastStreamID } == 0)
        try await first.wait("the connection to close") { $0.isClosed }
        // New connections are still welcome.
        let third = try await simulator.connect()
        #expect(try await third.request(Fixtures.headers()).status == 200)
    }

    @Test func goAwayWithALastStreamIDLeavesLaterInFlightStreamsUnprocessed() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        #expect(try await client.request(Fixtures.headers()).status == 200)  // stream 1; raises the limit
        try await client.wait("the raised limit") { $0.maxStreamsSeen.last == 500 }
        // Answers are held 2 s, so the three requests are surely in flight when GOAWAY goes out.
        #expect(try await simulator.controlRequest("PUT", "/latency", #"{"milliseconds":2000}"#).0 == 204)
        var ids: [Int32] = []
        for index in 0..<3 { ids.append(try await client.send(Fixtures.headers(["apns-collapse-id": "s\(index)"]))) }
        #expect(ids == [3, 5, 7])
        try await Task.sleep(for: .milliseconds(500))  // all three have reached the simulator
        #expect(try await simulator.controlRequest("GET", "/stats").1["responsesHeld"] as? Int == 3)
        #expect(
            try await simulator.controlRequest("POST", "/goaway", #"{"lastStreamId":3}"#).1["connections"] as? Int == 1)
        #expect(try await client.response(3).status == 200)
        try await client.wait("streams 5 and 7 refused") { $0.resets[5] != nil && $0.resets[7] != nil }
        #expect(try await client.read { [$0.resets[5], $0.resets[7]] } == [7, 7])  // REFUSED_STREAM
        #expect(try await client.read { $0.goAway?.lastStreamID } == 3)
        let (_, stats) = try await simulator.controlRequest("GET", "/stats")
        #expect(stats["accepted"] as? Int == 2)
        #expect(stats["streamsRefusedAfterGoAway"] as? Int == 2)
        #expect(stats["responsesHeld"] as? Int == 0)  // one answered, two refused
        let (_, recorded) = try await simulator.controlRequest("GET", "/notifications")
        #expect((recorded["notifications"] as? [Any])?.count == 2)
    }

    @Test func aRevokedKeyFailsEvenOnAConnectionThatCachedItsToken() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        let token = Fixtures.token()
        #expect(try await client.request(Fixtures.headers(token: token)).status == 200)
        #expect(try await simulator.controlRequest("POST", "/keys/\(Fixtures.keyID)/revoke").0 == 204)
        #expect(try await simulator.controlRequest("POST", "/keys/NOSUCHKEY/revoke").0 == 404)
        let response = try await client.request(Fixtures.headers(token: token))
        #expect(response.status == 403)
        #expect(response.reason == "InvalidProviderToken")
        // Reset restores the configuration's keys.
        #expect(try await simulator.controlRequest("POST", "/reset").0 == 204)
        #expect(try await client.request(Fixtures.headers(token: token)).status == 200)
    }

    @Test func anUninstalledTokenAnswers410WithTheTimestampSet() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        let path = "/devices/\(Fixtures.deviceToken.uppercased())/uninstall"
        #expect(try await simulator.controlRequest("POST", path, #"{"timestamp":1700000000123}"#).0 == 204)
        let response = try await client.request(Fixtures.headers())
        #expect(response.status == 410)
        #expect(
            String(decoding: response.body, as: UTF8.self) == #"{"reason":"Unregistered","timestamp":1700000000123}"#)
        #expect(try await simulator.controlRequest("DELETE", "/devices/\(Fixtures.deviceToken)").0 == 204)
        #expect(try await client.request(Fixtures.headers()).status == 200)
    }

    @Test func aTokenBoundToAnotherTopicIsDeviceTokenNotForTopic() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        #expect(
            try await simulator.controlRequest(
                "PUT", "/devices/\(Fixtures.deviceToken)", #"{"topic":"com.example.elsewhere"}"#
            ).0 == 204)
        let response = try await client.request(Fixtures.headers())
        #expect(response.status == 400)
        #expect(response.reason == "DeviceTokenNotForTopic")
    }

    @Test func aBundleIDMovedToAnotherTeamIsTopicDisallowed() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        #expect(try await client.request(Fixtures.headers()).status == 200)
        #expect(
            try await simulator.controlRequest(
                "PUT", "/bundles/\(Fixtures.bundleID)", #"{"teamId":"\#(Fixtures.otherTeamID)"}"#
            ).0 == 204)
        let response = try await client.request(Fixtures.headers())
        #expect(response.status == 400)
        #expect(response.reason == "TopicDisallowed")
    }

    @Test func aKeyAddedThroughTheControlAPIIsAccepted() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let key = try P256PrivateKey.generate()
        let pem = try key.publicKey.pemRepresentation
        let body = try JSONSerialization.data(withJSONObject: ["teamId": Fixtures.teamID, "publicKey": pem])
        #expect(
            try await simulator.controlRequest("PUT", "/keys/NEWKEY0001", String(decoding: body, as: UTF8.self)).0
                == 204)
        let client = try await simulator.connect()
        let token = try ES256JWT.sign(keyID: "NEWKEY0001", teamID: Fixtures.teamID, issuedAt: Date(), key: key)
        #expect(try await client.request(Fixtures.headers(token: token)).status == 200)
    }

    @Test func requestsAfterLatencyIsSetWaitForIt() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        let client = try await simulator.connect()
        #expect(try await client.request(Fixtures.headers()).status == 200)
        #expect(try await simulator.controlRequest("PUT", "/latency", #"{"milliseconds":300}"#).0 == 204)
        let start = ContinuousClock.now
        #expect(try await client.request(Fixtures.headers()).status == 200)
        #expect(ContinuousClock.now - start >= .milliseconds(300))
    }

    @Test func theControlAPIAnswersUnknownRoutesWith404() async throws {
        let simulator = try await RunningSimulator.start()
        defer { Task { await simulator.stop() } }
        #expect(try await simulator.controlRequest("GET", "/nothing").0 == 404)
        #expect(try await simulator.controlRequest("GET", "/health").1["ok"] as? Bool == true)
        #expect(try await simulator.controlRequest("POST", "/faults", "not json").0 == 400)
    }
}
