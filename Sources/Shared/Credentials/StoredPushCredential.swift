import Foundation

/// A push credential as read back for sending: its ids, status and opened key.
/// `description` never shows the key.
public struct StoredPushCredential: Sendable, CustomStringConvertible {
    public enum Status: String, Sendable, Codable {
        /// Usable.
        case active
        /// APNs refused its provider token (403 InvalidProviderToken…) after it was saved.
        case rejected
    }

    public let id: String
    public let accountID: String
    public let teamID: String
    public let keyID: String
    public let status: Status
    public let rejectedAt: Date?
    public let rejectedReason: String?
    public let privateKey: P256PrivateKey

    public init(
        id: String, accountID: String, teamID: String, keyID: String, status: Status, rejectedAt: Date?,
        rejectedReason: String?, privateKey: P256PrivateKey
    ) {
        self.id = id
        self.accountID = accountID
        self.teamID = teamID
        self.keyID = keyID
        self.status = status
        self.rejectedAt = rejectedAt
        self.rejectedReason = rejectedReason
        self.privateKey = privateKey
    }

    public var description: String {
        "StoredPushCredential(id: \(id), team: \(teamID), key: \(keyID), status: \(status.rawValue))"
    }
}
