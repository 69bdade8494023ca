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
    /// Made once with the dependencies, so every request's retried invalidations share it.
    let invalidationLog: InvalidationRetryLog

    var activity: ActivityLog { ActivityLog(postgres: postgres) }
    var credentialReader: PushCredentialReader { PushCredentialReader(postgres: postgres, sealer: sealer) }

    /// How long a failed invalidation is tried again: the entries' freshness
    /// (`CACHE_TTL_SECONDS`), after which they are read again from Postgres anyway.
    var invalidationRetryWindow: Duration = .seconds(300)

    /// Runs the cache invalidations after a committed change. The change is saved
    /// whatever happens here, so a failure is not answered: the invalidation is tried
    /// again in the background (`CacheInvalidation.retry`), so that a Redis blip does not
    /// leave the old values cached for the entries' whole freshness.
    func invalidate(_ what: String, _ body: @escaping @Sendable () async throws -> Void) async {
        do {
            try await CacheInvalidation.afterCommit(
                what, retryingFor: invalidationRetryWindow, log: invalidationLog, body)
        } catch {
            logger.warning(
                "cache invalidation failed; it is tried again in the background",
                metadata: ["change": what, "error": "\(error)"])
        }
    }
}
