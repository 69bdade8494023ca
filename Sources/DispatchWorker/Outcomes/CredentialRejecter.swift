import Shared
import Synchronization

/// Flags a credential APNs refused (403 InvalidProviderToken after a fresh token):
/// `status = 'rejected'` with the time and reason, so the admin API shows the
/// warning, and drops the cached copies of its apps, so the ingress answers 502
/// (1007) for their pushes. Only the first worker to flag it records the time and
/// reason, and an entry in the activity log (action `credential.rejected`, by
/// `worker:<WORKER_ID>`, in the same statement); each worker drops the apps' copies
/// once (also when another worker flagged it). Once the flag is written the refusal is settled: an invalidation that fails
/// is left to its background retries (`CacheInvalidation.afterCommit`), not thrown,
/// so the message is not sent to APNs again only to be refused again.
final class CredentialRejecter: Sendable {
    let postgres: PostgresClient
    /// The activity log's actor: `worker:<WORKER_ID>`.
    let actor: String
    private let logger: Logger
    /// The ingress's cache freshness by default (`CACHE_TTL_SECONDS`, an ingress
    /// setting): after it the apps' entries are read again from Postgres anyway.
    private let invalidationRetryWindow: Duration
    /// When this process last flagged each credential or dropped its apps' copies:
    /// the other messages in flight with it when APNs refused it (up to the in-flight
    /// limit) find it flagged already and need not drop the copies again. The flag
    /// itself is always written (one conditional UPDATE), so a credential reactivated
    /// (`verify`) and revoked again moments later is flagged at once.
    private let handled = Mutex<[String: ContinuousClock.Instant]>([:])
    private static let recentlyHandled = Duration.seconds(60)

    init(
        postgres: PostgresClient, workerID: String, logger: Logger = Logger(component: "worker.rejecter"),
        invalidationRetryWindow: Duration = .seconds(300)
    ) {
        self.postgres = postgres
        actor = "worker:\(workerID)"
        self.logger = logger
        self.invalidationRetryWindow = invalidationRetryWindow
    }

    /// Returns the apps this call flagged the credential for (empty when it was
    /// flagged already).
    @discardableResult
    func reject(credentialID: String, reason: String, invalidation: CacheInvalidation) async throws -> [String] {
        let now = ContinuousClock.now
        let changed = try await postgres.execute(
            """
            WITH flagged AS (
                UPDATE push_credentials SET status = 'rejected', rejected_at = now(), rejected_reason = \(reason)
                WHERE id = \(credentialID) AND status = 'active'
                RETURNING id, account_id
            )
            INSERT INTO activity_log (account_id, actor, action, subject, before, after)
            SELECT account_id, \(actor), 'credential.rejected', 'credential:' || id, '{"status": "active"}'::jsonb,
                jsonb_build_object('status', 'rejected', 'reason', \(reason)::text)
            FROM flagged
            """)
        if changed == 0, let last = handled.withLock({ $0[credentialID] }), now - last < Self.recentlyHandled {
            return []
        }
        let apps = try await postgres.query(
            """
            SELECT a.id FROM apps a JOIN push_credentials c ON c.id = a.credential_id
            WHERE c.id = \(credentialID) AND c.status = 'rejected' ORDER BY a.id
            """
        ).map { try $0.decode("id", as: String.self) }
        do {
            try await CacheInvalidation.afterCommit(
                "rejected credential", retryingFor: invalidationRetryWindow, log: InvalidationRetryLog(logger: logger)
            ) {
                for app in apps { try await invalidation.appChanged(app) }
            }
        } catch {
            logger.warning(
                "cannot drop the cached apps of a rejected credential yet; trying again in the background",
                metadata: ["credential": credentialID, "error": ThrottledLog.describe(error)])
        }
        handled.withLock { $0[credentialID] = now }
        return changed > 0 ? apps : []
    }
}
