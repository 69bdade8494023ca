import Foundation
import Shared

/// Platform users, their site-wide bans and per-app state in Postgres.
struct UsersRepository: Sendable {
    /// Creates the user if new; true when it was created.
    @discardableResult
    func upsert(_ id: String, on connection: PostgresConnection) async throws -> Bool {
        try await connection.execute("INSERT INTO users (id) VALUES (\(id)) ON CONFLICT (id) DO NOTHING") == 1
    }

    func find(_ id: String, on connection: PostgresConnection) async throws -> User? {
        let rows = try await connection.query(
            """
            SELECT u.id, u.created_at, b.reason AS ban_reason, b.banned_at
            FROM users u LEFT JOIN user_bans b ON b.user_id = u.id WHERE u.id = \(id)
            """)
        guard let row = rows.first else { return nil }
        let bannedAt: Date? = try row.decode("banned_at")
        let appRows = try await connection.query(
            """
            SELECT app_id FROM app_authorizations WHERE user_id = \(id)
            UNION SELECT app_id FROM app_unsubscribes WHERE user_id = \(id)
            UNION SELECT app_id FROM app_user_disables WHERE user_id = \(id)
            ORDER BY app_id
            """)
        var apps: [AppUserState] = []
        for appRow in appRows {
            apps.append(try await state(userID: id, appID: try appRow.decode("app_id"), on: connection))
        }
        return User(
            id: try row.decode("id"), createdAt: try row.decode("created_at"),
            banned: try bannedAt.map { User.Ban(reason: try row.decode("ban_reason"), at: $0) }, apps: apps)
    }

    func require(_ id: String, on connection: PostgresConnection) async throws -> User {
        guard let user = try await find(id, on: connection) else { throw AdminError.notFound("user", id) }
        return user
    }

    func delete(_ id: String, on connection: PostgresConnection) async throws {
        try await connection.execute("DELETE FROM users WHERE id = \(id)")
    }

    func ban(_ id: String, reason: String?, on connection: PostgresConnection) async throws {
        try await connection.execute(
            """
            INSERT INTO user_bans (user_id, reason) VALUES (\(id), \(reason))
            ON CONFLICT (user_id) DO UPDATE SET reason = excluded.reason
            """)
    }

    func unban(_ id: String, on connection: PostgresConnection) async throws {
        try await connection.execute("DELETE FROM user_bans WHERE user_id = \(id)")
    }

    func state(userID: String, appID: String, on connection: PostgresConnection) async throws -> AppUserState {
        let rows = try await connection.query(
            """
            SELECT EXISTS (SELECT 1 FROM app_authorizations WHERE user_id = \(userID) AND app_id = \(appID)) AS authorized,
                   EXISTS (SELECT 1 FROM app_unsubscribes WHERE user_id = \(userID) AND app_id = \(appID)) AS unsubscribed,
                   (SELECT reason FROM app_user_disables WHERE user_id = \(userID) AND app_id = \(appID)) AS disabled_reason,
                   EXISTS (SELECT 1 FROM app_user_disables WHERE user_id = \(userID) AND app_id = \(appID)) AS disabled
            """)
        let row = rows[0]
        return AppUserState(
            appId: appID, userId: userID, authorized: try row.decode("authorized"),
            unsubscribed: try row.decode("unsubscribed"), disabled: try row.decode("disabled"),
            disabledReason: try row.decode("disabled_reason"))
    }

    /// Grants or revokes the authorization. The user's subscriptions in the app stay
    /// bound to the user either way: while it is revoked, App API sends to them are
    /// skipped and the user's device list is empty (`AppAPIRepository`).
    func setAuthorized(_ authorized: Bool, userID: String, appID: String, on connection: PostgresConnection)
        async throws
    {
        if authorized {
            try await connection.execute(
                """
                INSERT INTO app_authorizations (user_id, app_id) VALUES (\(userID), \(appID))
                ON CONFLICT DO NOTHING
                """)
        } else {
            try await connection.execute(
                "DELETE FROM app_authorizations WHERE user_id = \(userID) AND app_id = \(appID)")
        }
    }

    func setUnsubscribed(_ unsubscribed: Bool, userID: String, appID: String, on connection: PostgresConnection)
        async throws
    {
        if unsubscribed {
            try await connection.execute(
                "INSERT INTO app_unsubscribes (user_id, app_id) VALUES (\(userID), \(appID)) ON CONFLICT DO NOTHING")
        } else {
            try await connection.execute(
                "DELETE FROM app_unsubscribes WHERE user_id = \(userID) AND app_id = \(appID)")
        }
    }

    func setDisabled(
        _ disabled: Bool, reason: String?, userID: String, appID: String, on connection: PostgresConnection
    ) async throws {
        if disabled {
            try await connection.execute(
                """
                INSERT INTO app_user_disables (user_id, app_id, reason) VALUES (\(userID), \(appID), \(reason))
                ON CONFLICT (user_id, app_id) DO UPDATE SET reason = excluded.reason
                """)
        } else {
            try await connection.execute(
                "DELETE FROM app_user_disables WHERE user_id = \(userID) AND app_id = \(appID)")
        }
    }
}
