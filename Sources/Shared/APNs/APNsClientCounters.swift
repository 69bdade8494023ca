import Synchronization

/// Event counts of one client, for metrics and tests. Atomic, so they can be
/// read from any thread; each is bumped on connection events and failures, not
/// per successful request.
final class APNsClientCounters: Sendable {
    let connectionsOpened = Atomic<Int>(0)
    let connectionsClosed = Atomic<Int>(0)
    let connectionFailures = Atomic<Int>(0)
    let pingTimeouts = Atomic<Int>(0)
    let retriedAfterGoAway = Atomic<Int>(0)
    let retriedAfterRefusal = Atomic<Int>(0)
    let overloaded = Atomic<Int>(0)
    let timeouts = Atomic<Int>(0)
    let providerTokenRefreshes = Atomic<Int>(0)

    var snapshot: APNsClient.Metrics {
        APNsClient.Metrics(
            connectionsOpened: connectionsOpened.load(ordering: .relaxed),
            connectionsClosed: connectionsClosed.load(ordering: .relaxed),
            connectionFailures: connectionFailures.load(ordering: .relaxed),
            pingTimeouts: pingTimeouts.load(ordering: .relaxed),
            retriedAfterGoAway: retriedAfterGoAway.load(ordering: .relaxed),
            retriedAfterRefusal: retriedAfterRefusal.load(ordering: .relaxed),
            overloaded: overloaded.load(ordering: .relaxed),
            timeouts: timeouts.load(ordering: .relaxed),
            providerTokenRefreshes: providerTokenRefreshes.load(ordering: .relaxed))
    }
}
