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
