import Synchronization

/// Bounds the messages on their way to one APNs destination (a credential in one
/// environment). The worker's in-flight permits are shared by every app, and the
/// queue is one line: a destination that answers slowly or not at all (up to the
/// APNs request timeout, 15 s) would otherwise take every permit and hold every other
/// app's messages behind its own (a probe saw another app's notifications 12 s late
/// behind one whose APNs took 5 s to answer, and 14 s late behind a burst of 4,000
/// into one that had just stopped answering). Messages past the bound are postponed
/// through the delayed-retry set (`MessageSender`), using no attempt; those of other
/// destinations go on.
///
/// Each destination has a window: `limit` at first, raised by one with every prompt
/// answer up to `ceiling` (the worker's permits), so one app's backlog drained at
/// full speed gets more in flight than the bound (in-flight = rate × latency) once
/// its answers show it can take them, while a burst into a destination that has
/// just gone silent stops at the bound. The window falls back to `limit` while the
/// destination is slow: an average answer time (over the last few) past
/// `slowAnswer`, or no answer at all for `slowAnswer` with messages on their way.
final class DestinationSlots: Sendable {
    private struct Destination {
        var inFlight = 0
        var window: Int
        /// Exponentially weighted average answer time, in seconds.
        var averageAnswer: Double = 0
        var lastAnswer: ContinuousClock.Instant
    }

    let limit: Int
    let ceiling: Int
    static let slowAnswer: Duration = .seconds(1)
    private static let slowAnswerSeconds = slowAnswer.inSeconds
    /// The weight of the newest answer time in the average.
    private static let weight = 0.5
    private let destinations = Mutex<[String: Destination]>([:])

    /// `limit` in flight to a destination until its answers raise it, up to `ceiling`.
    init(limit: Int, ceiling: Int) {
        precondition(limit >= 1)
        self.limit = limit
        self.ceiling = max(limit, ceiling)
    }

    /// The destination of a message: its credential and environment.
    static func key(credentialID: String, sandbox: Bool) -> String {
        credentialID + (sandbox ? ":sandbox" : ":production")
    }

    /// Takes up to `wanted` slots of `key`; returns how many it got (all of them
    /// unless the destination's window is full).
    func take(_ key: String, upTo wanted: Int, now: ContinuousClock.Instant = .now) -> Int {
        destinations.withLock { destinations in
            var destination = destinations[key] ?? Destination(window: limit, lastAnswer: now)
            if destination.inFlight > 0 && now - destination.lastAnswer > Self.slowAnswer {
                destination.window = limit
            }
            let granted = min(wanted, max(0, destination.window - destination.inFlight))
            destination.inFlight += granted
            destinations[key] = destination
            return granted
        }
    }

    /// About how long the destination takes to answer, in whole milliseconds: its
    /// average answer time, or, while messages wait on it, the time since its last
    /// answer if longer (a destination that went silent has no answers to average:
    /// its surplus would otherwise come back every few hundred milliseconds until the
    /// first timeouts). 0 when unknown.
    func answerTimeMilliseconds(_ key: String, now: ContinuousClock.Instant = .now) -> Int {
        destinations.withLock { destinations in
            guard let destination = destinations[key] else { return 0 }
            var seconds = destination.averageAnswer
            if destination.inFlight > 0 {
                seconds = max(seconds, (now - destination.lastAnswer).inSeconds)
            }
            return Int(min(seconds * 1000, 3_600_000))
        }
    }

    /// Gives a slot of `key` back: its message was answered (or failed) `elapsed`
    /// after it was sent.
    func give(_ key: String, elapsed: Duration, now: ContinuousClock.Instant = .now) {
        let seconds = elapsed.inSeconds
        destinations.withLock { destinations in
            guard var destination = destinations[key] else { return }
            destination.inFlight -= 1
            destination.averageAnswer = destination.averageAnswer * (1 - Self.weight) + seconds * Self.weight
            destination.lastAnswer = now
            if destination.averageAnswer > Self.slowAnswerSeconds {
                destination.window = limit
            } else if seconds <= Self.slowAnswerSeconds {
                destination.window = min(destination.window + 1, ceiling)
            }
            // A destination with nothing in flight and a prompt record is forgotten
            // (its window starts at the bound again); a slow one is kept, so its
            // record is not lost between messages.
            if destination.inFlight <= 0 && destination.averageAnswer <= Self.slowAnswerSeconds {
                destinations[key] = nil
            } else {
                destinations[key] = destination
            }
        }
    }
}
