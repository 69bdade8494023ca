import Shared
import Synchronization

/// The SHA-256 of App API keys this process found valid lately (`lifetime`): a
/// client IP past its allowance of invalid keys (`FailedLookupLimit`) still has these
/// looked up, so one misconfigured backend behind a shared egress address does not
/// lock out the others, while guessed keys stay refused before Postgres. A key is
/// looked up every time all the same: one revoked meanwhile is refused at once.
final class RecentlyValidKeys: Sendable {
    private let seen = Mutex<[[UInt8]: ContinuousClock.Instant]>([:])
    private let lifetime: Duration
    private let capacity: Int

    init(lifetime: Duration = .seconds(600), capacity: Int = 10_000) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    func record(_ keyHash: [UInt8], now: ContinuousClock.Instant = .now) {
        seen.withLock { seen in
            if seen.count >= capacity && seen[keyHash] == nil {
                seen = seen.filter { now - $0.value < lifetime }
                // Still full of live keys (far more backends than expected): start over
                // rather than grow; the others are recorded again at their next call.
                if seen.count >= capacity { seen.removeAll(keepingCapacity: true) }
            }
            seen[keyHash] = now
        }
    }

    func contains(_ keyHash: [UInt8], now: ContinuousClock.Instant = .now) -> Bool {
        seen.withLock { seen in seen[keyHash].map { now - $0 < lifetime } ?? false }
    }
}
