import Shared

/// Tries a credential (and optionally a topic) against APNs production before it is
/// saved: one request to a (well-formed) dummy device token, signed with the
/// credential's provider token; Apple's answer says whether the token or the topic
/// is wrong (the device token is never right, so a good pair gets BadDeviceToken).
protocol CredentialProbe: Sendable {
    /// One result per topic, in order, from one connection and one provider token
    /// (probing many bundle ids is not a burst of connections and tokens at Apple).
    /// Throws `CredentialProbeError` when APNs could not be asked (network, 5xx, 429).
    func probe(teamID: String, keyID: String, privateKey: P256PrivateKey, topics: [String])
        async throws(CredentialProbeError) -> [CredentialProbeResult]
}

/// What a probe learned.
enum CredentialProbeResult: Sendable, Equatable {
    /// The provider token was accepted and the topic belongs to the key's team.
    case accepted
    /// The provider token was refused (wrong key, team or key id; revoked key): Apple's reason.
    case credentialRejected(reason: String)
    /// The token was accepted but the topic is not the team's: Apple's reason.
    case topicRefused(reason: String)

    /// Judges APNs's answer (`status` and the `reason` of its body) to a probe.
    ///
    /// - 403 with a provider-token reason (InvalidProviderToken, …) → the credential is rejected;
    /// - 400 TopicDisallowed / DeviceTokenNotForTopic / BadTopic → the topic is refused;
    /// - 400 BadDeviceToken (the expected answer to the dummy token), 200, 410 → accepted;
    /// - 429 and 5xx → nil: APNs did not judge; try again later.
    static func judge(status: Int, reason: String?) -> CredentialProbeResult? {
        switch (status, reason) {
        case (200, _), (410, _): return .accepted
        case (403, let reason): return .credentialRejected(reason: reason ?? "Forbidden")
        case (400, "TopicDisallowed"), (400, "DeviceTokenNotForTopic"), (400, "BadTopic"), (400, "MissingTopic"):
            return .topicRefused(reason: reason ?? "TopicDisallowed")
        case (400, _): return .accepted
        default: return nil
        }
    }
}

/// APNs could not be asked, or did not judge (busy, down); nothing was decided.
struct CredentialProbeError: Error, Sendable, CustomStringConvertible {
    let message: String
    var description: String { message }
}
