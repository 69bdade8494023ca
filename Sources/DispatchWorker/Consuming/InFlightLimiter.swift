import Synchronization

/// Bounds the messages one process works on at once: a counting semaphore whose
/// permits are taken by the readers (a batch at a time) and given back when an
/// entry's outcomes have been recorded (or it was left for another worker). Readers
/// ask for entries, which hold several messages, so a read can bring more messages
/// than it took permits for; it takes the rest at once (`take`).
///
/// Waiters are served first come, first served, and permits given back go straight
/// to them: the queue reader gives all its permits back after an empty read and asks
/// again at once, and were it allowed to take them first, the claimer (entries of
/// dead workers, replies lost on the way) could wait behind it for ever.
///
/// Permits a read holds while it waits for entries (a blocking `XREADGROUP` holds a
/// batch's worth when the queue is empty) are not messages yet: `messagesInFlight`
/// leaves them out, until `finishRead` turns what the read brought into messages.
final class InFlightLimiter: Sendable {
    private struct Waiter {
        let minimum: Int
        let maximum: Int
        let continuation: CheckedContinuation<Int, Never>
    }

    private struct State {
        var available: Int
        /// Taken by `acquire` for reads not finished yet.
        var reading = 0
        /// In arrival order.
        var waiters: [Waiter] = []
        var closed = false

        /// Hands free permits to the waiters at the front, as long as the first is served.
        mutating func serveWaiters() -> [(CheckedContinuation<Int, Never>, Int)] {
            var served: [(CheckedContinuation<Int, Never>, Int)] = []
            while let first = waiters.first, available >= first.minimum {
                let count = min(first.maximum, available)
                available -= count
                reading += count
                waiters.removeFirst()
                served.append((first.continuation, count))
            }
            return served
        }
    }

    let limit: Int
    private let state: Mutex<State>

    init(limit: Int) {
        precondition(limit >= 1)
        self.limit = limit
        state = Mutex(State(available: limit))
    }

    /// Permits taken and not yet given back: messages and reads in progress.
    var inFlight: Int { state.withLock { limit - $0.available } }

    /// Messages taken and not yet given back (`pushgate_worker_in_flight`). Messages a
    /// read started can finish before the read is settled: never below 0 meanwhile.
    var messagesInFlight: Int { state.withLock { max(0, limit - $0.available - $0.reading) } }

    /// Callers waiting in `acquire`.
    var waiting: Int { state.withLock { $0.waiters.count } }

    /// Waits until at least `minimum` permits are free and nobody waits ahead (so a
    /// saturated reader fetches batches, not single entries), then takes up to
    /// `maximum` for a read, which `finishRead` or `abandonRead` settles. Returns 0
    /// once `close()` was called.
    func acquire(upTo maximum: Int, atLeast minimum: Int = 1) async -> Int {
        let minimum = max(1, min(minimum, maximum, limit))
        let taken: Int? = state.withLock { state in
            if state.closed { return 0 }
            guard state.waiters.isEmpty, state.available >= minimum else { return nil }
            let count = min(maximum, state.available)
            state.available -= count
            state.reading += count
            return count
        }
        if let taken { return taken }
        return await withCheckedContinuation { continuation in
            let served = state.withLock { state -> [(CheckedContinuation<Int, Never>, Int)] in
                if state.closed { return [(continuation, 0)] }
                state.waiters.append(Waiter(minimum: minimum, maximum: maximum, continuation: continuation))
                // Permits may have come back since the first look.
                return state.serveWaiters()
            }
            for (waiter, permits) in served { waiter.resume(returning: permits) }
        }
    }

    /// Settles a read that was `granted` permits and brought `messages`: those it did
    /// not need go back; those its messages need beyond them (entries hold several,
    /// and are in hand already) are taken whether or not they are free, and readers
    /// then wait until enough are given back.
    func finishRead(granted: Int, messages: Int) {
        let served = state.withLock { state in
            state.reading -= granted
            state.available += granted - messages
            return state.serveWaiters()
        }
        for (continuation, permits) in served { continuation.resume(returning: permits) }
    }

    /// Gives back the permits of a read that brought nothing (failed or stopped).
    func abandonRead(_ granted: Int) {
        finishRead(granted: granted, messages: 0)
    }

    /// Gives `count` permits back, to the waiters first.
    func release(_ count: Int = 1) {
        guard count > 0 else { return }
        let served = state.withLock { state in
            state.available += count
            return state.serveWaiters()
        }
        for (continuation, permits) in served { continuation.resume(returning: permits) }
    }

    /// Makes every present and future `acquire` return 0 (shutdown).
    func close() {
        let waiters = state.withLock { state in
            state.closed = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.continuation.resume(returning: 0) }
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
