import Synchronization

/// Bounds the messages on their way to one APNs destination (a credential in one
/// environment) while that destination is slow. The worker's in-flight permits are
/// shared by every app, and the queue is one line: a destination that answers slowly
/// or not at all (up to the APNs request timeout, 15 s) would otherwise take every
/// permit and hold every other app's messages behind its own (a probe saw another
/// app's notifications 12 s late behind one whose APNs took 5 s to answer). Messages
/// past the bound are postponed through the delayed-retry set (`MessageSender`),
/// using no attempt; those of other destinations go on.
///
/// A destination that answers promptly is not bounded: one app's backlog drained at
/// full speed needs more in flight than the bound (in-flight = rate × latency).
/// Slow is an average answer time (over the last few) past `slowAnswer`, or no
/// answer at all for `slowAnswer` while the bound is reached.
final class DestinationSlots: Sendable {
    private struct Destination {
        var inFlight = 0
        /// Exponentially weighted average answer time, in seconds.
        var averageAnswer: Double = 0
        var lastAnswer: ContinuousClock.Instant
    }

    let limit: Int
    static let slowAnswer: Duration = .seconds(1)
    private static let slowAnswerSeconds = 1.0
    /// The weight of the newest answer time in the average.
    private static let weight = 0.5
    private let destinations = Mutex<[String: Destination]>([:])

    init(limit: Int) {
        precondition(limit >= 1)
        self.limit = limit
    }

    /// The destination of a message: its credential and environment.
    static func key(credentialID: String, sandbox: Bool) -> String {
        credentialID + (sandbox ? ":sandbox" : ":production")
    }

    /// Takes up to `wanted` slots of `key`; returns how many it got (all of them
    /// unless the destination is slow and at its bound).
    func take(_ key: String, upTo wanted: Int, now: ContinuousClock.Instant = .now) -> Int {
        destinations.withLock { destinations in
            var destination = destinations[key] ?? Destination(lastAnswer: now)
            var granted = wanted
            if destination.inFlight + wanted > limit,
                destination.averageAnswer > Self.slowAnswerSeconds || now - destination.lastAnswer > Self.slowAnswer
            {
                granted = max(0, limit - destination.inFlight)
            }
            destination.inFlight += granted
            destinations[key] = destination
            return granted
        }
    }

    /// Gives a slot of `key` back: its message was answered (or failed) `elapsed`
    /// after it was sent.
    func give(_ key: String, elapsed: Duration, now: ContinuousClock.Instant = .now) {
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        destinations.withLock { destinations in
            guard var destination = destinations[key] else { return }
            destination.inFlight -= 1
            destination.averageAnswer = destination.averageAnswer * (1 - Self.weight) + seconds * Self.weight
            destination.lastAnswer = now
            // A destination with nothing in flight and a prompt record is forgotten;
            // a slow one is kept, so its next message is bounded at once.
            if destination.inFlight <= 0 && destination.averageAnswer <= Self.slowAnswerSeconds {
                destinations[key] = nil
            } else {
                destinations[key] = destination
            }
        }
    }
}
