import Foundation
import Shared

/// Accounts in Postgres. Methods run on a connection the caller leased, so a
/// controller can put a change and its activity record in one transaction.
struct AccountsRepository: Sendable {
    private static let columns = "id, name, plan, created_at, updated_at"

    func insert(_ id: String, name: String, plan: PlanName, on connection: PostgresConnection) async throws -> Account {
        do {
            let rows = try await connection.query(
                """
                INSERT INTO accounts (id, name, plan) VALUES (\(id), \(name), \(plan.rawValue))
                RETURNING id, name, plan, created_at, updated_at
                """)
            return try Self.account(rows[0])
        } catch let error as PostgresError where error.isUniqueViolation {
            throw AdminError.conflict("account_exists", "account \(id) already exists")
        }
    }

    /// The account, locked for the rest of the transaction when `forUpdate`.
    func find(_ id: String, forUpdate: Bool = false, on connection: PostgresConnection) async throws -> Account? {
        let rows = try await connection.query(
            forUpdate
                ? "SELECT id, name, plan, created_at, updated_at FROM accounts WHERE id = \(id) FOR UPDATE"
                : "SELECT id, name, plan, created_at, updated_at FROM accounts WHERE id = \(id)")
        return try rows.first.map(Self.account)
    }

    func require(_ id: String, forUpdate: Bool = false, on connection: PostgresConnection) async throws -> Account {
        guard let account = try await find(id, forUpdate: forUpdate, on: connection) else {
            throw AdminError.notFound("account", id)
        }
        return account
    }

    func list(limit: Int, after: String?, on connection: PostgresConnection) async throws -> [Account] {
        let rows = try await connection.query(
            """
            SELECT id, name, plan, created_at, updated_at FROM accounts
            WHERE (\(after)::text IS NULL OR id > \(after))
            ORDER BY id LIMIT \(limit)
            """)
        return try rows.map(Self.account)
    }

    func update(_ id: String, name: String, plan: PlanName, on connection: PostgresConnection) async throws -> Account {
        let rows = try await connection.query(
            """
            UPDATE accounts SET name = \(name), plan = \(plan.rawValue), updated_at = now() WHERE id = \(id)
            RETURNING id, name, plan, created_at, updated_at
            """)
        guard let row = rows.first else { throw AdminError.notFound("account", id) }
        return try Self.account(row)
    }

    func delete(_ id: String, on connection: PostgresConnection) async throws {
        try await connection.execute("DELETE FROM accounts WHERE id = \(id)")
    }

    /// Notifications handed to APNs since `monthStart` (UTC), from the daily counts.
    func sentSince(_ monthStart: Date, accountID: String, on connection: PostgresConnection) async throws -> Int {
        let day = UTCDay.text(of: monthStart)
        let rows = try await connection.query(
            """
            SELECT coalesce(sum(sent), 0)::bigint AS used FROM daily_counts
            WHERE account_id = \(accountID) AND day >= \(day)::date
            """)
        return try rows[0].decode("used", as: Int.self)
    }

    /// The daily counts of `from`…`to` (inclusive, `yyyy-MM-dd`), of one app if `appID` is given.
    func dailyCounts(
        accountID: String, from: String, to: String, appID: String?, on connection: PostgresConnection
    ) async throws -> [DailyCount] {
        let rows = try await connection.query(
            """
            SELECT day::text AS day, app_id, sent, failed, gone FROM daily_counts
            WHERE account_id = \(accountID) AND day BETWEEN \(from)::date AND \(to)::date
              AND (\(appID)::text IS NULL OR app_id = \(appID))
            ORDER BY day, app_id COLLATE "C"
            """)
        return try rows.map { row in
            DailyCount(
                day: try row.decode("day"), appId: try row.decode("app_id"), sent: try row.decode("sent"),
                failed: try row.decode("failed"), gone: try row.decode("gone"))
        }
    }

    static func account(_ row: PostgresRow) throws -> Account {
        Account(
            id: try row.decode("id"), name: try row.decode("name"),
            plan: PlanName(rawValue: try row.decode("plan", as: String.self)) ?? .lite,
            createdAt: try row.decode("created_at"), updatedAt: try row.decode("updated_at"))
    }
}
