import Foundation
import Shared

/// The record of every saved configuration change: who (the `X-Actor`), when, what
/// (`action` on `subject`) and the state before and after. Written in the same
/// transaction as the change, so a change and its record commit together.
/// Snapshots never contain key material (credentials are recorded by key id and team).
struct ActivityLog: Sendable {
    let postgres: PostgresClient

    func record(
        on connection: PostgresConnection, accountID: String?, actor: String, action: String, subject: String,
        before: (any Encodable)?, after: (any Encodable)?
    ) async throws {
        let beforeText = try before.map { try JSONValue.from($0).text() }
        let afterText = try after.map { try JSONValue.from($0).text() }
        try await connection.execute(
            """
            INSERT INTO activity_log (account_id, actor, action, subject, before, after)
            VALUES (\(accountID), \(actor), \(action), \(subject), \(beforeText)::jsonb, \(afterText)::jsonb)
            """)
    }

    /// Newest first. `accountID`/`subject` filter (a subject also matches the entries
    /// under it: `app:A` those on `app:A/user:U`); `beforeID` pages (entries older than it).
    func entries(accountID: String?, subject: String?, beforeID: Int64?, limit: Int) async throws -> [ActivityEntry] {
        let rows = try await postgres.query(
            """
            SELECT id, account_id, actor, action, subject, before::text AS before, after::text AS after, at
            FROM activity_log
            WHERE (\(accountID)::text IS NULL OR account_id = \(accountID))
              AND (\(subject)::text IS NULL OR subject = \(subject) OR starts_with(subject, \(subject) || '/'))
              AND (\(beforeID)::bigint IS NULL OR id < \(beforeID))
            ORDER BY id DESC
            LIMIT \(limit)
            """)
        return try rows.map { row in
            ActivityEntry(
                id: try row.decode("id"), accountId: try row.decode("account_id"), actor: try row.decode("actor"),
                action: try row.decode("action"), subject: try row.decode("subject"),
                before: try row.decode("before", as: String?.self).map(JSONValue.parse),
                after: try row.decode("after", as: String?.self).map(JSONValue.parse), at: try row.decode("at"))
        }
    }
}
