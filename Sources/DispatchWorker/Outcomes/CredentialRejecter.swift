import Shared

/// Flags a credential APNs refused (403 InvalidProviderToken after a fresh token):
/// `status = 'rejected'` with the time and reason, so the admin API shows the
/// warning, and drops the cached copies of its apps, so the ingress answers 502
/// (1007) for their pushes. Only the first worker to flag it changes anything.
struct CredentialRejecter: Sendable {
    let postgres: PostgresClient

    /// Returns the apps whose cache was dropped (empty when it was flagged already).
    @discardableResult
    func reject(credentialID: String, reason: String, invalidation: CacheInvalidation) async throws -> [String] {
        let changed = try await postgres.execute(
            """
            UPDATE push_credentials SET status = 'rejected', rejected_at = now(), rejected_reason = \(reason)
            WHERE id = \(credentialID) AND status = 'active'
            """)
        guard changed > 0 else { return [] }
        let apps = try await postgres.query("SELECT id FROM apps WHERE credential_id = \(credentialID) ORDER BY id")
            .map { try $0.decode("id", as: String.self) }
        for app in apps { try await invalidation.appChanged(app) }
        return apps
    }
}
