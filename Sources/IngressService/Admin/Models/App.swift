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
