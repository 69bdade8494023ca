import Synchronization
import TestSupport
import Testing

@testable import IngressService
@testable import Shared

/// `CacheInvalidation.retry`: what the admin API (and the sweep) do with a cache
/// invalidation that failed after its change was saved (the whole path, through a
/// cut Redis, is `AdminWithIngressTests`).
@Suite struct InvalidationRetryTests {
    @Test func aFailedInvalidationIsTriedAgainUntilItSucceeds() async {
        let calls = Mutex(0)
        let (logger, _) = TestEnvironment.capturingLogger("admin")
        await CacheInvalidation.retry(
            "app",
            {
                let call = calls.withLock { calls in
                    calls += 1
                    return calls
                }
                if call < 3 { throw RedisError(code: .connection, message: "connection cut") }
            }, within: .seconds(60), log: InvalidationRetryLog(logger: logger))
        #expect(calls.withLock { $0 } == 3)
    }

    /// Many requests' invalidations retried at once (a Redis slowdown under busy device
    /// traffic) share one throttled line, not one each.
    @Test func retriesSharingALogShareItsThrottle() async {
        let (logger, lines) = TestEnvironment.capturingLogger("device")
        let log = InvalidationRetryLog(logger: logger, interval: .seconds(60))
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<5 {
                group.addTask {
                    let calls = Mutex(0)
                    await CacheInvalidation.retry(
                        "subscription",
                        {
                            let call = calls.withLock { calls in
                                calls += 1
                                return calls
                            }
                            if call < 2 { throw RedisError(code: .timeout, message: "no answer") }
                        }, within: .seconds(60), log: log)
                }
            }
        }
        #expect(lines.all.filter { $0.contains("cache invalidation done on a later try") }.count == 1)
    }

    @Test func triesStopWhenTheServiceShutsDown() async {
        let calls = Mutex(0)
        let (logger, _) = TestEnvironment.capturingLogger("admin")
        let start = ContinuousClock.now
        await CacheInvalidation.retry(
            "app",
            {
                calls.withLock { $0 += 1 }
                throw ConnectionPoolError(code: .closed, poolName: "redis")
            }, within: .seconds(60), log: InvalidationRetryLog(logger: logger))
        #expect(calls.withLock { $0 } == 1)
        #expect(ContinuousClock.now - start < .seconds(30))
    }

    @Test func triesEndWithTheWindow() async {
        let calls = Mutex(0)
        let (logger, lines) = TestEnvironment.capturingLogger("admin")
        await CacheInvalidation.retry(
            "app",
            {
                calls.withLock { $0 += 1 }
                throw RedisError(code: .connection, message: "connection refused")
            }, within: .seconds(2), log: InvalidationRetryLog(logger: logger))
        // After 0.25 s, 0.5 s and 1 s (the last left out if the sleeps ran late): the
        // next pause, 2 s, would end past the window.
        #expect((2...3).contains(calls.withLock { $0 }))
        #expect(lines.all.contains { $0.contains("the change takes effect once the cached entries are read again") })
    }
}
