import Foundation
import Shared

/// A push credential as the admin API shows it: never its key.
struct Credential: Sendable, Codable, Equatable {
    var id: String
    var accountId: String
    var keyId: String
    var teamId: String
    /// `active` or `rejected`.
    var status: String
    var warning: PushWarning?
    /// The apps that use it.
    var apps: [String]
    var createdAt: Date
}

extension Credential {
    /// Absent values are written as `null` (an explicit "none" for API clients), not left out.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(accountId, forKey: .accountId)
        try container.encode(keyId, forKey: .keyId)
        try container.encode(teamId, forKey: .teamId)
        try container.encode(status, forKey: .status)
        try container.encode(warning, forKey: .warning)
        try container.encode(apps, forKey: .apps)
        try container.encode(createdAt, forKey: .createdAt)
    }
}
