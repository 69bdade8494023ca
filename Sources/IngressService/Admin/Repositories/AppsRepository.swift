import Foundation
import Shared

/// Apps, their push settings and identifiers in Postgres.
struct AppsRepository: Sendable {
    private static let select = """
        SELECT a.id, a.account_id, a.name, a.push_enabled, a.credential_id, a.created_at, a.updated_at,
               c.status AS credential_status, c.rejected_at, c.rejected_reason, o.plan AS owner_plan,
               coalesce(array(SELECT i.bundle_id FROM app_identifiers i WHERE i.app_id = a.id ORDER BY i.bundle_id),
                        '{}') AS bundle_ids
        FROM apps a JOIN accounts o ON o.id = a.account_id LEFT JOIN push_credentials c ON c.id = a.credential_id
        """

    func insert(_ id: String, accountID: String, name: String, on connection: PostgresConnection) async throws {
        do {
            try await connection.execute(
                "INSERT INTO apps (id, account_id, name) VALUES (\(id), \(accountID), \(name))")
        } catch let error as PostgresError where error.isUniqueViolation {
            throw AdminError.conflict("app_exists", "app \(id) already exists")
        }
    }

    func find(_ id: String, on connection: PostgresConnection) async throws -> App? {
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: Self.select + " WHERE a.id = $1", binds: [id.postgresData]))
        return try rows.first.map(Self.app)
    }

    func require(_ id: String, on connection: PostgresConnection) async throws -> App {
        guard let app = try await find(id, on: connection) else { throw AdminError.notFound("app", id) }
        return app
    }

    /// Locks the app's row for the rest of the transaction (serializes saves of one app).
    func lock(_ id: String, on connection: PostgresConnection) async throws -> App {
        let rows = try await connection.query("SELECT id FROM apps WHERE id = \(id) FOR UPDATE")
        guard !rows.isEmpty else { throw AdminError.notFound("app", id) }
        return try await require(id, on: connection)
    }

    func list(accountID: String, on connection: PostgresConnection) async throws -> [App] {
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: Self.select + " WHERE a.account_id = $1 ORDER BY a.id", binds: [accountID.postgresData]))
        return try rows.map(Self.app)
    }

    func rename(_ id: String, name: String, on connection: PostgresConnection) async throws {
        try await connection.execute("UPDATE apps SET name = \(name), updated_at = now() WHERE id = \(id)")
    }

    func setPush(_ id: String, enabled: Bool, credentialID: String?, on connection: PostgresConnection) async throws {
        try await connection.execute(
            """
            UPDATE apps SET push_enabled = \(enabled), credential_id = \(credentialID), updated_at = now()
            WHERE id = \(id)
            """)
    }

    /// Bundle ids of other apps that equal any of `bundleIDs` ignoring case, with their apps.
    func conflicts(_ bundleIDs: [String], excluding appID: String, on connection: PostgresConnection) async throws
        -> [(bundleID: String, appID: String)]
    {
        guard !bundleIDs.isEmpty else { return [] }
        let lowered = bundleIDs.map { $0.lowercased() }
        let rows = try await connection.query(
            """
            SELECT bundle_id, app_id FROM app_identifiers
            WHERE lower(bundle_id) = ANY(\(lowered)) AND app_id <> \(appID)
            ORDER BY bundle_id
            """)
        return try rows.map { (try $0.decode("bundle_id"), try $0.decode("app_id")) }
    }

    /// Deletes the identifiers and, first, their subscriptions; returns the deleted subscriptions' ids.
    func removeIdentifiers(_ bundleIDs: [String], appID: String, on connection: PostgresConnection) async throws
        -> [String]
    {
        guard !bundleIDs.isEmpty else { return [] }
        let deleted = try await connection.query(
            "DELETE FROM subscriptions WHERE app_id = \(appID) AND topic = ANY(\(bundleIDs)) RETURNING id")
        try await connection.execute(
            "DELETE FROM app_identifiers WHERE app_id = \(appID) AND bundle_id = ANY(\(bundleIDs))")
        return try deleted.map { try $0.decode("id", as: String.self) }
    }

    /// Gives identifiers whose case alone changed their new spelling; their
    /// subscriptions follow (`ON UPDATE CASCADE`) and are kept. Returns those
    /// subscriptions' ids.
    func renameIdentifiers(_ renames: [BundleIDRename], appID: String, on connection: PostgresConnection)
        async throws -> [String]
    {
        guard !renames.isEmpty else { return [] }
        for rename in renames {
            try await connection.execute(
                "UPDATE app_identifiers SET bundle_id = \(rename.to) WHERE app_id = \(appID) AND bundle_id = \(rename.from)"
            )
        }
        let topics = renames.map(\.to)
        return try await connection.query(
            "SELECT id FROM subscriptions WHERE app_id = \(appID) AND topic = ANY(\(topics))"
        )
        .map { try $0.decode("id", as: String.self) }
    }

    func addIdentifiers(_ bundleIDs: [String], appID: String, on connection: PostgresConnection) async throws {
        for bundleID in bundleIDs {
            do {
                try await connection.execute(
                    "INSERT INTO app_identifiers (bundle_id, app_id) VALUES (\(bundleID), \(appID))")
            } catch let error as PostgresError where error.isUniqueViolation {
                throw AdminError.conflict("bundle_id_taken", "bundle id \(bundleID) is already used by another app")
            }
        }
    }

    /// Ids of the app's subscriptions (for cache invalidation before the app is deleted).
    func subscriptionIDs(appID: String, on connection: PostgresConnection) async throws -> [String] {
        try await connection.query("SELECT id FROM subscriptions WHERE app_id = \(appID)")
            .map { try $0.decode("id", as: String.self) }
    }

    func delete(_ id: String, on connection: PostgresConnection) async throws {
        try await connection.execute("DELETE FROM apps WHERE id = \(id)")
    }

    static func app(_ row: PostgresRow) throws -> App {
        let enabled: Bool = try row.decode("push_enabled")
        let credentialID: String? = try row.decode("credential_id")
        let ownerPlan = Plan(rawValue: try row.decode("owner_plan"))
        var warning: PushWarning?
        // In the order the ingress refuses pushes: the plan (403 1010) before the credential (502 1007).
        if enabled && !ownerPlan.offersPush {
            warning = .planWithoutPush
        } else if try row.decode("credential_status", as: String?.self) == "rejected" {
            warning = .rejected(reason: try row.decode("rejected_reason"), at: try row.decode("rejected_at"))
        } else if enabled && credentialID == nil {
            warning = .missing
        }
        return App(
            id: try row.decode("id"), accountId: try row.decode("account_id"), name: try row.decode("name"),
            pushEnabled: enabled, credentialId: credentialID, bundleIds: try row.decode("bundle_ids"),
            warning: warning, createdAt: try row.decode("created_at"), updatedAt: try row.decode("updated_at"))
    }
}
