import Foundation
import Shared

@testable import APNsSimulator

/// Teams, keys and requests shared by the simulator's tests.
enum Fixtures {
    static let teamID = "TEAM000001"
    static let keyID = "KEY0000001"
    static let bundleID = "com.example.app"
    static let otherTeamID = "TEAM000002"
    static let otherKeyID = "KEY0000002"
    static let otherBundleID = "com.example.other"
    static let deviceToken = String(repeating: "ab", count: 32)

    /// Made once per test process.
    static let key = try! P256PrivateKey.generate()
    static let otherKey = try! P256PrivateKey.generate()

    static func configuration(
        tokenUpdatePeriodSeconds: Int64 = 20 * 60, maxConcurrentStreams: UInt32 = 500, eventLoops: Int = 2
    ) -> SimulatorConfiguration {
        var configuration = SimulatorConfiguration(teams: [
            teamID: .init(keys: [keyID: key.publicKey], bundleIDs: [bundleID]),
            otherTeamID: .init(keys: [otherKeyID: otherKey.publicKey], bundleIDs: [otherBundleID]),
        ])
        configuration.tokenUpdatePeriodSeconds = tokenUpdatePeriodSeconds
        configuration.maxConcurrentStreams = maxConcurrentStreams
        configuration.eventLoops = eventLoops
        return configuration
    }

    static func rules(tokenUpdatePeriodSeconds: Int64 = 20 * 60) -> SimulatorRules {
        SimulatorRules(configuration: configuration(tokenUpdatePeriodSeconds: tokenUpdatePeriodSeconds))
    }

    /// One token for the whole process: a connection may not switch tokens within
    /// 20 minutes, and ECDSA makes every new signature (so every new token) different.
    static let defaultToken = token()

    static func token(
        issuedAt: Date = Date(), keyID: String = keyID, teamID: String = teamID, key: P256PrivateKey = key
    ) -> String {
        try! ES256JWT.sign(keyID: keyID, teamID: teamID, issuedAt: issuedAt, key: key)
    }

    static let payload = Array(
        #"{"aps":{"alert":{"title":"Hi","body":"New message"},"mutable-content":1},"c":"abc"}"#.utf8)

    /// A request Apple accepts; `changes` replaces (value) or removes (nil) headers.
    static func headers(
        token: String? = nil, deviceToken: String = deviceToken, _ changes: [String: String?] = [:]
    ) -> [HTTP2Header] {
        var list: [(String, String)] = [
            (":method", "POST"), (":scheme", "https"), (":authority", "localhost"),
            (":path", "/3/device/\(deviceToken)"), ("authorization", "bearer \(token ?? defaultToken)"),
            ("apns-topic", bundleID), ("apns-push-type", "alert"), ("apns-priority", "10"),
            ("apns-expiration", "0"), ("apns-id", "123E4567-E89B-12D3-A456-426614174000"),
        ]
        for (name, value) in changes {
            if let index = list.firstIndex(where: { $0.0 == name }) {
                if let value { list[index].1 = value } else { list.remove(at: index) }
            } else if let value {
                list.append((name, value))
            }
        }
        return list.map { HTTP2Header($0.0, $0.1) }
    }
}
