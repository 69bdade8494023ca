import Foundation
import Shared

/// App API keys in Postgres: only the SHA-256 of a key is stored.
struct APIKeysRepository: Sendable {
    func insert(
        appID: String, name: String, keyHash: [UInt8], scopes: [AppAPIScope], on connection: PostgresConnection
    ) async throws -> APIKey {
        let rows = try await connection.query(
            """
            INSERT INTO app_api_keys (app_id, name, key_hash, scopes)
            VALUES (\(appID), \(name), \(keyHash), \(scopes.map(\.rawValue)))
            RETURNING id, app_id, name, scopes, created_at, revoked_at
            """)
        return try Self.key(rows[0])
    }

    func list(appID: String, on connection: PostgresConnection) async throws -> [APIKey] {
        try await connection.query(
            """
            SELECT id, app_id, name, scopes, created_at, revoked_at FROM app_api_keys
            WHERE app_id = \(appID) ORDER BY id
            """
        ).map(Self.key)
    }

    func find(_ id: Int64, appID: String, on connection: PostgresConnection) async throws -> APIKey? {
        try await connection.query(
            """
            SELECT id, app_id, name, scopes, created_at, revoked_at FROM app_api_keys
            WHERE id = \(id) AND app_id = \(appID)
            """
        ).first.map(Self.key)
    }

    /// Revokes the key (idempotent: a revoked key keeps its first revocation time).
    func revoke(_ id: Int64, appID: String, on connection: PostgresConnection) async throws -> APIKey? {
        try await connection.query(
            """
            UPDATE app_api_keys SET revoked_at = coalesce(revoked_at, now())
            WHERE id = \(id) AND app_id = \(appID)
            RETURNING id, app_id, name, scopes, created_at, revoked_at
            """
        ).first.map(Self.key)
    }

    static func key(_ row: PostgresRow) throws -> APIKey {
        APIKey(
            id: try row.decode("id"), appId: try row.decode("app_id"), name: try row.decode("name"),
            scopes: try row.decode("scopes", as: [String].self).map(AppAPIScope.init(rawValue:)),
            createdAt: try row.decode("created_at"), revokedAt: try row.decode("revoked_at"), key: nil)
    }
}

extension APIKeysRepository {
    /// The stored SHA-256 of key `id` (for invalidating the App API's key cache).
    func hash(_ id: Int64, on connection: PostgresConnection) async throws -> [UInt8] {
        try await connection.query("SELECT key_hash FROM app_api_keys WHERE id = \(id)")[0].decode("key_hash")
    }
}
