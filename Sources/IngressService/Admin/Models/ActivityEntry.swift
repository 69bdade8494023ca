import Foundation

/// One saved change: who did what to which subject, and its state before and after.
struct ActivityEntry: Sendable, Codable, Equatable {
    var id: Int64
    var accountId: String?
    var actor: String
    /// e.g. `app.push.update`
    var action: String
    /// e.g. `app:app_1f2e…`
    var subject: String
    var before: JSONValue?
    var after: JSONValue?
    var at: Date
}
