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

    /// How long a failed invalidation is tried again: the entries' freshness
    /// (`CACHE_TTL_SECONDS`), after which they are read again from Postgres anyway.
    var invalidationRetryWindow: Duration = .seconds(300)

    /// Runs the cache invalidations after a committed change. The change is saved
    /// whatever happens here, so a failure is not answered: the invalidation is tried
    /// again in the background (`retryInvalidation`), so that a Redis blip does not
    /// leave the old values cached for the entries' whole freshness.
    func invalidate(_ what: String, _ body: @escaping @Sendable () async throws -> Void) async {
        do {
            try await body()
        } catch {
            logger.warning(
                "cache invalidation failed; it is tried again in the background",
                metadata: ["change": what, "error": "\(error)"])
            Task { [logger, invalidationRetryWindow] in
                await Self.retryInvalidation(what, body, within: invalidationRetryWindow, logger: logger)
            }
        }
    }

    /// Tries `body` again after 0.25 s, then at doubling intervals up to 8 s, until it
    /// succeeds or `window` has passed. Invalidations are idempotent, so one that runs
    /// after a later change's own does no harm (one more cache miss at most).
    static func retryInvalidation(
        _ what: String, _ body: @Sendable () async throws -> Void, within window: Duration, logger: Logger
    ) async {
        let deadline = ContinuousClock.now + window
        var pause = Duration.milliseconds(250)
        var lastError: any Error = CancellationError()
        while ContinuousClock.now + pause < deadline {
            try? await Task.sleep(for: pause)
            do {
                try await body()
                logger.info("cache invalidation done on a later try", metadata: ["change": what])
                return
            } catch let error as RedisError where error.code == .closed {
                return  // shutting down
            } catch let error as ConnectionPoolError where error.code == .closed {
                return  // shutting down
            } catch {
                lastError = error
            }
            pause = min(pause * 2, .seconds(8))
        }
        logger.error(
            "cache invalidation failed; the change takes effect once the cached entries are read again",
            metadata: ["change": what, "error": "\(lastError)"])
    }
}
