/// A token-based APNs credential: the `.p8` signing key with its key id and team id.
/// `id` is the credential's stable identity (its database id): provider tokens and
/// connection pools are keyed by it.
public struct APNsCredential: Sendable, CustomStringConvertible {
    public let id: String
    public let teamID: String
    public let keyID: String
    public let privateKey: P256PrivateKey

    public init(id: String, teamID: String, keyID: String, privateKey: P256PrivateKey) {
        self.id = id
        self.teamID = teamID
        self.keyID = keyID
        self.privateKey = privateKey
    }

    /// Never shows the key.
    public var description: String { "APNsCredential(id: \(id), team: \(teamID), key: \(keyID))" }
}
