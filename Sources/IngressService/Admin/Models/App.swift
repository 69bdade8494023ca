import Foundation

/// An app and its push settings as the admin API shows them.
struct App: Sendable, Codable, Equatable {
    var id: String
    var accountId: String
    var name: String
    var pushEnabled: Bool
    var credentialId: String?
    /// iOS bundle ids (APNs topics), sorted.
    var bundleIds: [String]
    var warning: PushWarning?
    var createdAt: Date
    var updatedAt: Date
}

extension App {
    /// Absent values are written as `null` (an explicit "none" for API clients), not left out.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(accountId, forKey: .accountId)
        try container.encode(name, forKey: .name)
        try container.encode(pushEnabled, forKey: .pushEnabled)
        try container.encode(credentialId, forKey: .credentialId)
        try container.encode(bundleIds, forKey: .bundleIds)
        try container.encode(warning, forKey: .warning)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(updatedAt, forKey: .updatedAt)
    }
}

/// One of an app's bundle ids listed again in another case: the same id
/// (`AppsController.normalize`), kept with its subscriptions under the new spelling.
struct BundleIDRename: Equatable, Sendable {
    let from: String
    let to: String
}
