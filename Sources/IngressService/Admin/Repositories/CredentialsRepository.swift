import Foundation
import Shared

/// Push credentials in Postgres. Reads never select `sealed_key`; only
/// `PushCredentialReader` (Shared) opens keys.
struct CredentialsRepository: Sendable {
    private static let select = """
        SELECT c.id, c.account_id, c.key_id, c.team_id, c.status, c.rejected_at, c.rejected_reason, c.created_at,
               coalesce(array(SELECT a.id FROM apps a WHERE a.credential_id = c.id ORDER BY a.id), '{}') AS apps
        FROM push_credentials c
        """

    func insert(
        id: String, accountID: String, teamID: String, keyID: String, sealedKey: [UInt8],
        on connection: PostgresConnection
    ) async throws {
        do {
            try await connection.execute(
                """
                INSERT INTO push_credentials (id, account_id, team_id, key_id, sealed_key)
                VALUES (\(id), \(accountID), \(teamID), \(keyID), \(sealedKey))
                """)
        } catch let error as PostgresError where error.isUniqueViolation {
            throw AdminError.conflict(
                "credential_exists", "account \(accountID) already has a credential with key id \(keyID)")
        }
    }

    func find(_ id: String, on connection: PostgresConnection) async throws -> Credential? {
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: Self.select + " WHERE c.id = $1", binds: [id.postgresData]))
        return try rows.first.map(Self.credential)
    }

    func require(_ id: String, on connection: PostgresConnection) async throws -> Credential {
        guard let credential = try await find(id, on: connection) else { throw AdminError.notFound("credential", id) }
        return credential
    }

    func list(accountID: String, on connection: PostgresConnection) async throws -> [Credential] {
        let rows = try await connection.query(
            PostgresQuery(
                unsafeSQL: Self.select + " WHERE c.account_id = $1 ORDER BY c.created_at, c.id",
                binds: [accountID.postgresData]))
        return try rows.map(Self.credential)
    }

    /// Locks the credential's row (so no app attaches to it meanwhile) and returns the apps that use it.
    func lockAndListApps(_ id: String, on connection: PostgresConnection) async throws -> [String]? {
        let rows = try await connection.query("SELECT id FROM push_credentials WHERE id = \(id) FOR UPDATE")
        guard !rows.isEmpty else { return nil }
        return try await connection.query("SELECT id FROM apps WHERE credential_id = \(id) ORDER BY id")
            .map { try $0.decode("id", as: String.self) }
    }

    /// Detaches the credential from every app (they keep push settings; sends fail credential_missing).
    func detach(_ id: String, on connection: PostgresConnection) async throws {
        try await connection.execute(
            "UPDATE apps SET credential_id = NULL, updated_at = now() WHERE credential_id = \(id)")
    }

    /// Clears a rejection (`CredentialsController.verify`).
    func markActive(_ id: String, on connection: PostgresConnection) async throws {
        try await connection.execute(
            """
            UPDATE push_credentials SET status = 'active', rejected_at = NULL, rejected_reason = NULL
            WHERE id = \(id)
            """)
    }

    /// Flags the credential as a worker does when APNs refuses it (`CredentialsController.verify`).
    func markRejected(_ id: String, reason: String, on connection: PostgresConnection) async throws {
        try await connection.execute(
            """
            UPDATE push_credentials SET status = 'rejected', rejected_at = now(), rejected_reason = \(reason)
            WHERE id = \(id)
            """)
    }

    func delete(_ id: String, on connection: PostgresConnection) async throws {
        try await connection.execute("DELETE FROM push_credentials WHERE id = \(id)")
    }

    static func credential(_ row: PostgresRow) throws -> Credential {
        let status: String = try row.decode("status")
        let warning: PushWarning? =
            status == "rejected"
            ? .rejected(reason: try row.decode("rejected_reason"), at: try row.decode("rejected_at")) : nil
        return Credential(
            id: try row.decode("id"), accountId: try row.decode("account_id"), keyId: try row.decode("key_id"),
            teamId: try row.decode("team_id"), status: status, warning: warning, apps: try row.decode("apps"),
            createdAt: try row.decode("created_at"))
    }
}
