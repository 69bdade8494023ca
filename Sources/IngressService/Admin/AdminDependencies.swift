import Foundation
import Shared

/// What the admin API's controllers share.
struct AdminDependencies: Sendable {
    let postgres: PostgresClient
    let sealer: PushCredentialSealer
    let probe: any CredentialProbe
    let invalidator: any CacheInvalidator
    let quota: any QuotaCounter
    let logger: Logger
    let now: @Sendable () -> Date

    var activity: ActivityLog { ActivityLog(postgres: postgres) }
    var credentialReader: PushCredentialReader { PushCredentialReader(postgres: postgres, sealer: sealer) }

    /// Runs the cache invalidations after a committed change. A failure is logged, not
    /// answered: the change is saved, and the entries' freshness (`CACHE_TTL_SECONDS`,
    /// after which they are read again from Postgres) bounds the staleness.
    func invalidate(_ what: String, _ body: () async throws -> Void) async {
        do {
            try await body()
        } catch {
            logger.error("cache invalidation failed", metadata: ["change": what, "error": "\(error)"])
        }
    }
}
