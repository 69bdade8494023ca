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

extension ActivityEntry {
    /// Absent values are written as `null` (an explicit "none" for API clients), not left out.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(accountId, forKey: .accountId)
        try container.encode(actor, forKey: .actor)
        try container.encode(action, forKey: .action)
        try container.encode(subject, forKey: .subject)
        try container.encode(before, forKey: .before)
        try container.encode(after, forKey: .after)
        try container.encode(at, forKey: .at)
    }
}
