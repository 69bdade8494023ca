import Foundation

/// A problem the owner must act on, shown on the credential card and on every app
/// that uses the credential: `credential_rejected` (APNs refused the key after it
/// was saved) or `credential_missing` (push is on but no credential is chosen); on
/// an app also `plan_without_push` (push is on, but the owner's plan lost push).
struct PushWarning: Sendable, Codable, Equatable {
    var code: String
    var message: String
    /// When a worker marked the credential rejected.
    var at: Date?

    static func rejected(reason: String?, at: Date?) -> PushWarning {
        PushWarning(
            code: "credential_rejected",
            // `reason` is the workers' "APNs answered <Apple's reason>".
            message:
                "this credential was rejected (\(reason ?? "InvalidProviderToken")); sends fail until it is "
                + "verified again (once Apple accepts it) or replaced",
            at: at)
    }

    static let missing = PushWarning(
        code: "credential_missing", message: "push is enabled but no push credential is selected; sends fail", at: nil)

    static let planWithoutPush = PushWarning(
        code: "plan_without_push",
        message:
            "push is enabled but the account's plan has no push; registrations and pushes are refused until an upgrade",
        at: nil)
}

extension PushWarning {
    /// Absent values are written as `null` (an explicit "none" for API clients), not left out.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(code, forKey: .code)
        try container.encode(message, forKey: .message)
        try container.encode(at, forKey: .at)
    }
}
