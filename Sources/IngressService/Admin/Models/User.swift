import Foundation

/// A platform user: site-wide ban, and per-app state.
struct User: Sendable, Codable, Equatable {
    struct Ban: Sendable, Codable, Equatable {
        var reason: String?
        var at: Date

        /// A ban without a reason says `"reason": null`, as every absent value does.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(reason, forKey: .reason)
            try container.encode(at, forKey: .at)
        }
    }

    var id: String
    var createdAt: Date
    var banned: Ban?
    var apps: [AppUserState]
}

extension User {
    /// Absent values are written as `null` (an explicit "none" for API clients), not left out.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(banned, forKey: .banned)
        try container.encode(apps, forKey: .apps)
    }
}
