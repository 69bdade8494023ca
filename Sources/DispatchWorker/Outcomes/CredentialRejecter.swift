import Shared

/// Flags a credential APNs refused (403 InvalidProviderToken after a fresh token):
/// `status = 'rejected'` with the time and reason, so the admin API shows the
/// warning, and drops the cached copies of its apps, so the ingress answers 502
/// (1007) for their pushes. Only the first worker to flag it records the time and
/// reason; every call drops the apps' copies while it is flagged.
struct CredentialRejecter: Sendable {
    let postgres: PostgresClient

    /// Returns the apps this call flagged the credential for (empty when it was
    /// flagged already).
    @discardableResult
    func reject(credentialID: String, reason: String, invalidation: CacheInvalidation) async throws -> [String] {
        let changed = try await postgres.execute(
            """
            UPDATE push_credentials SET status = 'rejected', rejected_at = now(), rejected_reason = \(reason)
            WHERE id = \(credentialID) AND status = 'active'
            """)
        // Also when another worker, or an earlier try of this message whose
        // invalidation failed, flagged it: left cached, its apps would take pushes
        // (201) until their entries age. Invalidations are idempotent.
        let apps = try await postgres.query(
            """
            SELECT a.id FROM apps a JOIN push_credentials c ON c.id = a.credential_id
            WHERE c.id = \(credentialID) AND c.status = 'rejected' ORDER BY a.id
            """
        ).map { try $0.decode("id", as: String.self) }
        for app in apps { try await invalidation.appChanged(app) }
        return changed > 0 ? apps : []
    }
}
