import Foundation
import Shared

/// An App API key's record; `key` is present only in the answer that created it.
struct APIKey: Sendable, Codable, Equatable {
    var id: Int64
    var appId: String
    var name: String
    var scopes: [AppAPIScope]
    var createdAt: Date
    var revokedAt: Date?
    var key: String?
}

extension APIKey {
    /// Absent values are written as `null` (an explicit "none" for API clients), not left out.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(appId, forKey: .appId)
        try container.encode(name, forKey: .name)
        try container.encode(scopes, forKey: .scopes)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(revokedAt, forKey: .revokedAt)
        try container.encodeIfPresent(key, forKey: .key)
    }
}
