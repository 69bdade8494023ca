import Synchronization

/// Bounds the messages one process works on at once: a counting semaphore whose
/// permits are taken by the readers (a batch at a time) and given back when an
/// entry's outcomes have been recorded (or it was left for another worker). Readers
/// ask for entries, which hold several messages, so a read can bring more messages
/// than it took permits for; it takes the rest at once (`take`).
final class InFlightLimiter: Sendable {
    private struct State {
        var available: Int
        var waiters: [CheckedContinuation<Void, Never>] = []
        var closed = false
    }

    let limit: Int
    private let state: Mutex<State>

    init(limit: Int) {
        precondition(limit >= 1)
        self.limit = limit
        state = Mutex(State(available: limit))
    }

    /// Messages taken and not yet given back.
    var inFlight: Int { state.withLock { limit - $0.available } }

    /// Waits until at least `minimum` permits are free (so a saturated reader fetches
    /// batches, not single entries), then takes up to `maximum`. Returns 0 once
    /// `close()` was called.
    func acquire(upTo maximum: Int, atLeast minimum: Int = 1) async -> Int {
        let minimum = max(1, min(minimum, maximum, limit))
        while true {
            let taken: Int? = state.withLock { state in
                if state.closed { return 0 }
                guard state.available >= minimum else { return nil }
                let count = min(maximum, state.available)
                state.available -= count
                return count
            }
            if let taken { return taken }
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state in
                    if state.closed || state.available >= minimum { return true }
                    state.waiters.append(continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    /// Takes `count` permits whether or not they are free: a read that brought more
    /// messages than it took permits for (entries hold several) has them in hand
    /// already. Readers then wait until enough are given back.
    func take(_ count: Int) {
        guard count > 0 else { return }
        state.withLock { $0.available -= count }
    }

    /// Gives `count` permits back and wakes the readers waiting for them.
    func release(_ count: Int = 1) {
        guard count > 0 else { return }
        let waiters = state.withLock { state in
            state.available += count
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Makes every present and future `acquire` return 0 (shutdown).
    func close() {
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until every permit is back or `deadline` passes; true when drained.
    func drain(until deadline: ContinuousClock.Instant) async -> Bool {
        while inFlight > 0 {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }
}
