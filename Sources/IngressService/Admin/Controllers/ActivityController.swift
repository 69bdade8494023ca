import Foundation
import Shared

/// The activity log, newest first.
struct ActivityController: Sendable {
    struct EntryList: Encodable {
        var entries: [ActivityEntry]
    }

    let dependencies: AdminDependencies

    var routes: [AdminRoute] {
        [
            AdminRoute("GET", "/activity", list),
            AdminRoute("GET", "/accounts/:id/activity", list),
        ]
    }

    /// Query: `account`, `subject` (e.g. `app:app_…`, also matching `app:app_…/user:…`), `before` (an entry id, for paging), `limit` (1…1000, default 100).
    func list(_ request: AdminRequest) async throws -> HTTPResponse {
        let account = try request.parameters["id"] ?? request.nonEmptyQuery("account")
        let limit = try request.integer("limit", default: 100, range: 1...1000)
        var beforeID: Int64?
        if let text = try request.nonEmptyQuery("before") {
            guard let value = Int64(text) else {
                throw AdminError.invalid("query parameter before must be an entry id")
            }
            beforeID = value
        }
        let entries = try await dependencies.activity.entries(
            accountID: account, subject: try request.nonEmptyQuery("subject"), beforeID: beforeID, limit: limit)
        return AdminResponse.ok(EntryList(entries: entries))
    }
}
