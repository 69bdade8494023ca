import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator

/// `APNsClient` against the strict simulator: each of Apple's answers reaches the
/// caller with its exact status, its apns-id and its typed `APNsReason`; answers
/// our client cannot provoke are shown to be refused (or normalised) before sending.
@Suite struct ClientReasonTests {
    @Test func anAcceptedNotificationAnswers200WithItsAPNsIDAndIsRecordedAsSent() async throws {
        try await Simulator.with { simulator, client in
            let credential = Teams.credential()
            let id = UUID()
            var notification = Teams.notification(id: id)
            notification.collapseID = "thread-1"
            notification.priority = .considerPower
            notification.expiration = .at(Date(timeIntervalSince1970: 1_900_000_000))
            let response = try await client.send(
                notification, credential: credential, environment: simulator.environment)
            #expect(response == APNsResponse(status: 200, apnsID: id, reason: nil))

            let recorded = simulator.state.recordings()
            try #require(recorded.count == 1)
            #expect(UUID(uuidString: recorded[0].apnsID) == id)
            #expect(recorded[0].deviceToken == Teams.deviceToken)
            #expect(recorded[0].topic == Teams.bundleA)
            #expect(recorded[0].teamID == Teams.teamA)
            #expect(recorded[0].keyID == Teams.keyA)
            #expect(recorded[0].payload == Teams.payload)
            let headers = Dictionary(recorded[0].headers.map { ($0.name, $0.value) }, uniquingKeysWith: { $1 })
            #expect(headers["apns-push-type"] == "alert")
            #expect(headers["apns-priority"] == "5")
            #expect(headers["apns-expiration"] == "1900000000")
            #expect(headers["apns-collapse-id"] == "thread-1")
            #expect(headers["apns-topic"] == Teams.bundleA)

            // Without our own apns-id, the one APNs made comes back and is the one it recorded.
            let anonymous = try await client.send(
                Teams.notification(id: nil), credential: credential, environment: simulator.environment)
            #expect(anonymous.status == 200)
            let made = try #require(anonymous.apnsID)
            #expect(simulator.state.recordings().last.flatMap { UUID(uuidString: $0.apnsID) } == made)
        }
    }

    /// MissingTopic cannot come from our client: `apns-topic` is always sent, and
    /// an empty topic is refused before anything goes out.
    @Test func missingTopicIsImpossibleTheClientRefusesAnEmptyTopicWithoutSending() async throws {
        try await Simulator.with { simulator, client in
            let result = await client.result(
                Teams.notification(topic: ""), credential: Teams.credential(), environment: simulator.environment)
            guard case .failure(let error) = result else {
                Issue.record("expected invalidRequest, got \(result)")
                return
            }
            #expect(error.code == .invalidRequest)
            let stats = try await simulator.stats()
            #expect(stats.accepted == 0)
            #expect(stats.rejected.isEmpty)
            #expect(stats.connectionsOpened == 0)
        }
    }

    @Test func aBundleIDOfAnotherTeamIsTopicDisallowedAndMovingItChangesTheAnswer() async throws {
        try await Simulator.with { simulator, client in
            let credential = Teams.credential()
            let id = UUID()
            let refused = try await client.send(
                Teams.notification(topic: Teams.bundleB, id: id), credential: credential,
                environment: simulator.environment)
            #expect(refused == APNsResponse(status: 400, apnsID: id, reason: .topicDisallowed))
            // Control API: team B's bundle id moves to team A, team A's own one to team B.
            #expect(
                try await simulator.control("PUT", "/bundles/\(Teams.bundleB)", #"{"teamId":"\#(Teams.teamA)"}"#).0
                    == 204)
            #expect(
                try await simulator.control("PUT", "/bundles/\(Teams.bundleA)", #"{"teamId":"\#(Teams.teamB)"}"#).0
                    == 204)
            let moved = try await client.send(
                Teams.notification(topic: Teams.bundleB), credential: credential, environment: simulator.environment)
            #expect(moved.status == 200)
            let lost = try await client.send(
                Teams.notification(topic: Teams.bundleA), credential: credential, environment: simulator.environment)
            #expect(lost.status == 400)
            #expect(lost.reason == .topicDisallowed)
            #expect(try await simulator.stats().rejected == ["TopicDisallowed": 2])
        }
    }

    @Test func aShortHexDeviceTokenIsBadDeviceTokenAndANonHexOneIsRefusedBeforeSending() async throws {
        try await Simulator.with { simulator, client in
            let credential = Teams.credential()
            let id = UUID()
            let response = try await client.send(
                Teams.notification(deviceToken: "abc123", id: id), credential: credential,
                environment: simulator.environment)
            #expect(response == APNsResponse(status: 400, apnsID: id, reason: .badDeviceToken))
            let result = await client.result(
                Teams.notification(deviceToken: "not-hex"), credential: credential, environment: simulator.environment)
            guard case .failure(let error) = result else {
                Issue.record("expected invalidRequest, got \(result)")
                return
            }
            #expect(error.code == .invalidRequest)
            #expect(try await simulator.stats().rejected == ["BadDeviceToken": 1])
        }
    }

    @Test func anUninstalledTokenIsUnregisteredWithItsTimestamp() async throws {
        try await Simulator.with { simulator, client in
            let credential = Teams.credential()
            let stated = String(repeating: "b2", count: 32)
            #expect(
                try await simulator.control("POST", "/devices/\(stated)/uninstall", #"{"timestamp":1700000000123}"#).0
                    == 204)
            let id = UUID()
            let response = try await client.send(
                Teams.notification(deviceToken: stated, id: id), credential: credential,
                environment: simulator.environment)
            #expect(response.status == 410)
            #expect(response.apnsID == id)
            #expect(response.reason == .unregistered(timestamp: Date(timeIntervalSince1970: 1_700_000_000.123)))
            let timestamp = try #require(response.unregisteredTimestamp)
            #expect(abs(timestamp.timeIntervalSince1970 - 1_700_000_000.123) < 0.000_5)

            // Without a timestamp the simulator uses "now".
            let current = String(repeating: "c3", count: 32)
            let before = Date()
            #expect(try await simulator.control("POST", "/devices/\(current)/uninstall").0 == 204)
            let now = try await client.send(
                Teams.notification(deviceToken: current), credential: credential, environment: simulator.environment)
            #expect(now.status == 410)
            let nowStamp = try #require(now.unregisteredTimestamp)
            #expect(nowStamp.timeIntervalSince(before) > -1 && nowStamp.timeIntervalSince(before) < 10)
            // Forgetting the uninstall makes the token deliverable again.
            #expect(try await simulator.control("DELETE", "/devices/\(current)").0 == 204)
            #expect(
                try await client.send(
                    Teams.notification(deviceToken: current), credential: credential, environment: simulator.environment
                ).status == 200)
        }
    }

    @Test func aTokenBoundToAnotherTopicIsDeviceTokenNotForTopic() async throws {
        try await Simulator.with { simulator, client in
            let credential = Teams.credential()
            #expect(
                try await simulator.control("PUT", "/devices/\(Teams.deviceToken)", #"{"topic":"\#(Teams.bundleA2)"}"#)
                    .0
                    == 204)
            let id = UUID()
            let response = try await client.send(
                Teams.notification(topic: Teams.bundleA, id: id), credential: credential,
                environment: simulator.environment)
            #expect(response == APNsResponse(status: 400, apnsID: id, reason: .deviceTokenNotForTopic))
            let right = try await client.send(
                Teams.notification(topic: Teams.bundleA2), credential: credential, environment: simulator.environment)
            #expect(right.status == 200)
        }
    }

    @Test func a4097BytePayloadIsPayloadTooLargeAnd4096IsAccepted() async throws {
        try await Simulator.with { simulator, client in
            let credential = Teams.credential()
            let id = UUID()
            let tooLarge = try await client.send(
                Teams.notification(id: id, payload: Teams.payload(ofSize: 4097)), credential: credential,
                environment: simulator.environment)
            #expect(tooLarge == APNsResponse(status: 413, apnsID: id, reason: .payloadTooLarge))
            let largest = try await client.send(
                Teams.notification(payload: Teams.payload(ofSize: 4096)), credential: credential,
                environment: simulator.environment)
            #expect(largest.status == 200)
            #expect(simulator.state.recordings().last?.payload.count == 4096)
        }
    }

    /// What our client can send wrong, and Apple's answer to it.
    @Test func headerValuesTheClientPassesThroughGetApplesReasons() async throws {
        try await Simulator.with { simulator, client in
            let credential = Teams.credential()
            var cases: [(String, APNsNotification, Int, APNsReason)] = []
            var priority = Teams.notification()
            priority.priority = APNsPriority(rawValue: 7)
            cases.append(("priority 7", priority, 400, .badPriority))
            var longCollapse = Teams.notification()
            longCollapse.collapseID = String(repeating: "k", count: 65)
            cases.append(("65-byte collapse id", longCollapse, 400, .badCollapseId))
            var emptyCollapse = Teams.notification()
            emptyCollapse.collapseID = ""
            cases.append(("empty collapse id", emptyCollapse, 400, .badCollapseId))
            var pushType = Teams.notification()
            pushType.pushType = APNsPushType(rawValue: "nonsense")
            cases.append(("unknown push type", pushType, 400, .invalidPushType))
            var voip = Teams.notification()
            voip.pushType = .voip
            cases.append(("voip without the .voip topic", voip, 400, .topicDisallowed))
            cases.append(("topic with a space", Teams.notification(topic: "com.example app"), 400, .badTopic))
            cases.append(("empty payload", Teams.notification(payload: []), 400, .payloadEmpty))
            cases.append(
                ("payload without aps", Teams.notification(payload: Array("[1]".utf8)), 400, .unknown("BadPayload")))
            for (what, notification, status, reason) in cases {
                let response = try await client.send(
                    notification, credential: credential, environment: simulator.environment)
                #expect(
                    response == APNsResponse(status: status, apnsID: notification.apnsID, reason: reason), "\(what)")
            }
            // The edge values are accepted.
            var edge = Teams.notification()
            edge.collapseID = String(repeating: "k", count: 64)
            edge.priority = .low
            edge.expiration = .immediately
            #expect(
                try await client.send(edge, credential: credential, environment: simulator.environment).status == 200)
        }
    }

    /// BadExpirationDate, BadMessageId, MissingProviderToken, MethodNotAllowed,
    /// BadPath, DuplicateHeaders and MissingDeviceToken cannot come from our client:
    /// the types only produce valid values, and the request line is fixed.
    @Test func malformedExpirationAndMessageIDCannotBeSentTheTypesNormaliseThem() async throws {
        try await Simulator.with { simulator, client in
            // A date before 1970 is sent as 0 (a non-negative integer), never as "-5".
            var past = Teams.notification()
            past.expiration = .at(Date(timeIntervalSince1970: -5))
            #expect(APNsExpiration.at(Date(timeIntervalSince1970: -5)).headerValue == "0")
            let response = try await client.send(
                past, credential: Teams.credential(), environment: simulator.environment)
            #expect(response.status == 200)
            let headers = Dictionary(
                (simulator.state.recordings().last?.headers ?? []).map { ($0.name, $0.value) }, uniquingKeysWith: { $1 }
            )
            #expect(headers["apns-expiration"] == "0")
            // apns-id is a UUID, sent in canonical form.
            #expect(headers["apns-id"].map(APNsRequestValidator.isCanonicalUUID) == true)
            // An empty device token is refused before sending (it would be MissingDeviceToken).
            let empty = await client.result(
                Teams.notification(deviceToken: ""), credential: Teams.credential(), environment: simulator.environment)
            guard case .failure(let error) = empty else {
                Issue.record("expected invalidRequest, got \(empty)")
                return
            }
            #expect(error.code == .invalidRequest)
            #expect(try await simulator.stats().rejected.isEmpty)
        }
    }

    @Test func injected429And500And503ReachTheCallerTypedAndAreNotRetried() async throws {
        try await Simulator.with { simulator, client in
            let credential = Teams.credential()
            #expect(
                try await client.send(Teams.notification(), credential: credential, environment: simulator.environment)
                    .status == 200)
            for status in [429, 500, 503] {
                #expect(try await simulator.control("POST", "/faults", #"{"status":\#(status),"count":1}"#).0 == 204)
            }
            var answers: [APNsResponse] = []
            var ids: [UUID] = []
            for _ in 0..<4 {
                let id = UUID()
                ids.append(id)
                answers.append(
                    try await client.send(
                        Teams.notification(id: id), credential: credential, environment: simulator.environment))
            }
            #expect(
                answers == [
                    APNsResponse(status: 429, apnsID: ids[0], reason: .tooManyRequests),
                    APNsResponse(status: 500, apnsID: ids[1], reason: .internalServerError),
                    APNsResponse(status: 503, apnsID: ids[2], reason: .serviceUnavailable),
                    APNsResponse(status: 200, apnsID: ids[3], reason: nil),
                ])
            let stats = try await simulator.stats()
            #expect(stats.rejected == ["TooManyRequests": 1, "InternalServerError": 1, "ServiceUnavailable": 1])
            #expect(stats.accepted == 2)
        }
    }
}
