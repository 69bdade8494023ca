import Foundation
import Shared

/// Rows the admin API will create one day, written straight into Postgres with
/// unique ids per test: an account, optionally a credential, an app and a bundle id.
/// Shared by the ingress and worker tests.
package struct Fixture: Sendable {
    package let accountID: String
    package let appID: String
    package let credentialID: String?
    package let topic: String

    package static func create(
        _ postgres: PostgresClient, plan: String = "plus", pushEnabled: Bool = true,
        credential: String? = "active"
    ) async throws -> Fixture {
        let unique = Base64URL.encode(SecureRandom.bytes(9)).replacingOccurrences(of: "_", with: "0")
            .replacingOccurrences(of: "-", with: "1")
        let accountID = "acct-\(unique)"
        let appID = "app-\(unique)"
        let topic = "com.test.\(unique)"
        try await postgres.execute("INSERT INTO accounts (id, plan) VALUES (\(accountID), \(plan))")
        var credentialID: String?
        if let status = credential {
            let id = "cred-\(unique)"
            credentialID = id
            try await postgres.execute(
                """
                INSERT INTO push_credentials (id, account_id, team_id, key_id, sealed_key, status, rejected_at)
                VALUES (\(id), \(accountID), 'TEAM123456', \("KEY" + unique), \([UInt8](repeating: 1, count: 8)),
                    \(status), CASE WHEN \(status) = 'rejected' THEN now() END)
                """)
        }
        try await postgres.execute(
            "INSERT INTO apps (id, account_id, push_enabled, credential_id) VALUES (\(appID), \(accountID), \(pushEnabled), \(credentialID))"
        )
        try await postgres.execute("INSERT INTO app_identifiers (bundle_id, app_id) VALUES (\(topic), \(appID))")
        return Fixture(accountID: accountID, appID: appID, credentialID: credentialID, topic: topic)
    }

    /// A random 64-hex-digit device token.
    package static func token() -> String {
        SecureRandom.bytes(32).map { String(format: "%02x", $0) }.joined()
    }

    /// A well-formed aes128gcm message (RFC 8188 header, one record); random content.
    package static func message(recordLength: Int = 100, recordSize: UInt32 = 4096) -> [UInt8] {
        var bytes = SecureRandom.bytes(16)
        bytes += withUnsafeBytes(of: recordSize.bigEndian) { Array($0) }
        bytes += [65] + senderKeys.randomElement()!
        bytes += SecureRandom.bytes(recordLength)
        return bytes
    }

    /// Senders' ephemeral public keys, points on P-256 (the ingress refuses a keyid off
    /// the curve): a few made once, as making one per message would slow bulk tests.
    package static let senderKeys: [[UInt8]] = (0..<8).map { _ in
        try! P256PrivateKey.generate().publicKey.uncompressedPoint
    }

    package static let pushHeaders: [(String, String)] = [("TTL", "60"), ("Content-Encoding", "aes128gcm")]

    /// A valid P-256 point and 16-byte auth, base64url.
    package static func keys() -> (p256dh: String, auth: String) {
        let key = try! P256PrivateKey.generate()
        return (Base64URL.encode(key.publicKey.uncompressedPoint), Base64URL.encode(SecureRandom.bytes(16)))
    }
}
