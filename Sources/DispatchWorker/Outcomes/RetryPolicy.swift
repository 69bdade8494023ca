/// When a message that failed for a reason worth retrying (429, 5xx, connection
/// loss, timeout) is tried again: exponential backoff with jitter, bounded by the
/// message's expiration and a maximum number of attempts.
struct RetryPolicy: Sendable {
    /// APNs attempts per message, the first included.
    let maxAttempts: Int
    let baseMilliseconds: Int
    let capMilliseconds: Int

    enum Decision: Equatable, Sendable {
        /// Try again after this many milliseconds.
        case retry(afterMilliseconds: Int)
        /// No more attempts (the count is used up, or the message expires first).
        case giveUp
    }

    /// The decision after attempt number `attempts` (1 = the first) failed, at
    /// `nowMilliseconds`, for a message that must be sent before `deadlineMilliseconds`.
    /// `random` gives a value in `0..<1` (injected for tests).
    func decide(
        attempts: Int, nowMilliseconds: Int64, deadlineMilliseconds: Int64,
        random: () -> Double = { Double.random(in: 0..<1) }
    ) -> Decision {
        guard attempts < maxAttempts else { return .giveUp }
        let delay = self.delay(afterAttempts: attempts, random: random)
        guard nowMilliseconds + Int64(delay) < deadlineMilliseconds else { return .giveUp }
        return .retry(afterMilliseconds: delay)
    }

    /// The decision for a message that could not be tried at all (`DeliveryOutcome.postponed`),
    /// `ageMilliseconds` after it was accepted: look again after half its age so far,
    /// between the base and the cap (at least `atLeastMilliseconds` before jitter),
    /// with jitter. The wait grows with the outage as the attempts' backoff does, yet
    /// uses none of them; only the deadline ends it (the last look comes at the
    /// deadline, not after it).
    func postpone(
        ageMilliseconds: Int64, atLeastMilliseconds: Int = 0, nowMilliseconds: Int64, deadlineMilliseconds: Int64,
        random: () -> Double = { Double.random(in: 0..<1) }
    ) -> Decision {
        let remaining = deadlineMilliseconds - nowMilliseconds
        guard remaining > 0 else { return .giveUp }
        let wanted = max(Int64(baseMilliseconds), ageMilliseconds / 2, Int64(atLeastMilliseconds))
        let full = Int(min(Int64(capMilliseconds), wanted))
        let delay = Self.jittered(full, random: random)
        return .retry(afterMilliseconds: Int(min(Int64(delay), remaining)))
    }

    /// `min(cap, base·2^(attempts−1))`: half of it fixed, half random ("equal jitter"),
    /// so retries of a burst spread out while the backoff still grows.
    func delay(afterAttempts attempts: Int, random: () -> Double = { Double.random(in: 0..<1) }) -> Int {
        let exponent = min(max(attempts - 1, 0), 30)
        let full = min(
            capMilliseconds,
            baseMilliseconds.multipliedReportingOverflow(by: 1 << exponent).overflow
                ? capMilliseconds : baseMilliseconds << exponent)
        return Self.jittered(full, random: random)
    }

    /// Half of `full` fixed, half random.
    private static func jittered(_ full: Int, random: () -> Double) -> Int {
        let half = full / 2
        return half + Int(Double(full - half) * min(max(random(), 0), 0.999_999))
    }
}
