import Foundation

/// A platform user: site-wide ban, and per-app state.
struct User: Sendable, Codable, Equatable {
    struct Ban: Sendable, Codable, Equatable {
        var reason: String?
        var at: Date
    }

    var id: String
    var createdAt: Date
    var banned: Ban?
    var apps: [AppUserState]
}
