import Foundation

/// A signed APNs provider token (ES256 JWT) and what it was signed with.
public struct ProviderToken: Sendable, Equatable, CustomStringConvertible {
    /// The compact JWT. Secret: never logged.
    public let value: String
    /// Its `iat`, in whole seconds.
    public let issuedAt: Date
    public let keyID: String
    public let teamID: String

    public init(value: String, issuedAt: Date, keyID: String, teamID: String) {
        self.value = value
        self.issuedAt = issuedAt
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Signs a new token for `credential` issued at `now` (rounded down to the second).
    public static func sign(for credential: APNsCredential, now: Date) throws -> ProviderToken {
        let issuedAt = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let value: String
        do {
            value = try ES256JWT.sign(
                keyID: credential.keyID, teamID: credential.teamID, issuedAt: issuedAt, key: credential.privateKey)
        } catch {
            throw APNsClientError(
                .providerToken, "the credential's key cannot sign a provider token", underlying: error)
        }
        return ProviderToken(value: value, issuedAt: issuedAt, keyID: credential.keyID, teamID: credential.teamID)
    }

    /// Whether it was signed with `credential`'s key for its team.
    public func belongs(to credential: APNsCredential) -> Bool {
        keyID == credential.keyID && teamID == credential.teamID
    }

    public var description: String {
        "ProviderToken(key: \(keyID), team: \(teamID), iat: \(Int64(issuedAt.timeIntervalSince1970)))"
    }
}
