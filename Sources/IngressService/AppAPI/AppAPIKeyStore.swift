import Shared

/// App API keys in Postgres, looked up by the SHA-256 of the presented key.
struct AppAPIKeyStore: Sendable {
    let postgres: PostgresClient

    struct StoredKey: Sendable {
        let appID: String
        let keyHash: [UInt8]
        let scopes: [String]
        let revoked: Bool
    }

    func key(hash: [UInt8]) async throws -> StoredKey? {
        let rows = try await postgres.query(
            .prepared(
                "app_api_key_by_hash",
                """
                SELECT app_id, key_hash, scopes, revoked_at IS NOT NULL AS revoked
                FROM app_api_keys WHERE key_hash = \(hash)
                """))
        guard let row = rows.first else { return nil }
        return StoredKey(
            appID: try row.decode("app_id"), keyHash: try row.decode("key_hash"), scopes: try row.decode("scopes"),
            revoked: try row.decode("revoked"))
    }
}
