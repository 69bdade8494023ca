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
