import Foundation
import Shared

/// What the simulator knows, read from a JSON file (see `example-config.json`):
///
/// ```json
/// {
///   "teams": {
///     "TEAMID1234": {
///       "keys": { "KEYID12345": "-----BEGIN PUBLIC KEY-----\n…\n-----END PUBLIC KEY-----\n" },
///       "bundleIds": ["com.example.app"]
///     }
///   },
///   "maxConcurrentStreams": 500,
///   "tokenUpdatePeriodSeconds": 1200,
///   "tokenLifetimeSeconds": 3600,
///   "maxRecordedNotifications": 10000,
///   "eventLoops": 2
/// }
/// ```
///
/// A key is the public half of a `.p8`: SPKI PEM (`BEGIN PUBLIC KEY`), the
/// uncompressed point (65 bytes, base64 or base64url), or, for convenience in
/// local runs, the `.p8` itself (only its public half is kept). Only `teams` is
/// required; every other field has the default shown.
struct SimulatorConfiguration: Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    struct Team: Sendable {
        var keys: [String: P256PublicKey]
        var bundleIDs: [String]
    }

    var teams: [String: Team]
    /// SETTINGS_MAX_CONCURRENT_STREAMS once a connection's provider token was accepted (1 before).
    var maxConcurrentStreams: UInt32 = 500
    /// A connection may switch to a new provider token only this long after the previous one.
    var tokenUpdatePeriodSeconds: Int64 = 20 * 60
    /// Tokens whose `iat` is older than this answer ExpiredProviderToken.
    var tokenLifetimeSeconds: Int64 = 60 * 60
    /// Accepted notifications kept for the control API; the oldest go first.
    var maxRecordedNotifications = 10_000
    /// Event loop threads serving connections; default one per core.
    var eventLoops = ProcessInfo.processInfo.activeProcessorCount

    init(teams: [String: Team]) {
        self.teams = teams
    }

    init(contentsOfFile path: String) throws(Failure) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw Failure(description: "cannot read configuration \(path): \(error.localizedDescription)")
        }
        try self.init(json: data)
    }

    init(json: Data) throws(Failure) {
        let file: File
        do {
            file = try JSONDecoder().decode(File.self, from: json)
        } catch {
            throw Failure(description: "configuration is not the expected JSON: \(error)")
        }
        var teams: [String: Team] = [:]
        var owners: [String: String] = [:]
        var keyOwners: [String: String] = [:]
        for (teamID, team) in file.teams {
            var keys: [String: P256PublicKey] = [:]
            for (keyID, text) in team.keys ?? [:] {
                if let other = keyOwners.updateValue(teamID, forKey: keyID) {
                    throw Failure(description: "key \(keyID) is listed under teams \(other) and \(teamID)")
                }
                do {
                    keys[keyID] = try Self.publicKey(text)
                } catch {
                    throw Failure(description: "key \(keyID) of team \(teamID): \(error)")
                }
            }
            for bundleID in team.bundleIds ?? [] {
                if let other = owners.updateValue(teamID, forKey: bundleID) {
                    throw Failure(description: "bundle id \(bundleID) is listed under teams \(other) and \(teamID)")
                }
            }
            teams[teamID] = Team(keys: keys, bundleIDs: team.bundleIds ?? [])
        }
        self.teams = teams
        if let value = file.maxConcurrentStreams {
            guard value >= 1 else { throw Failure(description: "maxConcurrentStreams must be at least 1") }
            maxConcurrentStreams = value
        }
        if let value = file.tokenUpdatePeriodSeconds {
            guard value >= 0 else { throw Failure(description: "tokenUpdatePeriodSeconds must not be negative") }
            tokenUpdatePeriodSeconds = value
        }
        if let value = file.tokenLifetimeSeconds {
            guard value >= 1 else { throw Failure(description: "tokenLifetimeSeconds must be positive") }
            tokenLifetimeSeconds = value
        }
        if let value = file.maxRecordedNotifications {
            guard value >= 0 else { throw Failure(description: "maxRecordedNotifications must not be negative") }
            maxRecordedNotifications = value
        }
        if let value = file.eventLoops {
            guard (1...64).contains(value) else { throw Failure(description: "eventLoops must be 1…64") }
            eventLoops = value
        }
    }

    /// A P-256 public key from SPKI PEM, a PKCS#8 private key PEM (its public
    /// half), or a base64/base64url uncompressed point.
    static func publicKey(_ text: String) throws -> P256PublicKey {
        if text.contains("PRIVATE KEY-----") {
            return try P256PrivateKey(pemRepresentation: text).publicKey
        }
        if text.contains("-----BEGIN") {
            return try P256PublicKey(pemRepresentation: text)
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let urlSafe = trimmed.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        guard let point = Base64URL.decode(urlSafe) else {
            throw Failure(description: "a key must be PEM or a base64(url) uncompressed point")
        }
        return try P256PublicKey(uncompressedPoint: point)
    }

    /// The file's shape.
    private struct File: Decodable {
        struct Team: Decodable {
            var keys: [String: String]?
            var bundleIds: [String]?
        }
        var teams: [String: Team]
        var maxConcurrentStreams: UInt32?
        var tokenUpdatePeriodSeconds: Int64?
        var tokenLifetimeSeconds: Int64?
        var maxRecordedNotifications: Int?
        var eventLoops: Int?
    }
}
