import Synchronization

/// A reader's view of Postgres for work it can do without it: after a read failed,
/// the reader skips Postgres (the worker's waited-message checks send unchecked, the
/// ingress's stale cache entries stay in use) rather than make every later caller
/// wait on a dead, frozen or unreachable database, and a probe in the background
/// (`SELECT 1` every `probeInterval`) ends the pause as soon as Postgres answers
/// again: within a second of its return rather than after a fixed time, and with no
/// caller waiting on it meanwhile.
public final class PostgresPause: Sendable {
    private let postgres: PostgresClient
    public let probeInterval: Duration
    private struct State {
        var paused = false
        var probing = false
    }
    private let state = Mutex(State())

    public init(postgres: PostgresClient, probeInterval: Duration = .seconds(1)) {
        self.postgres = postgres
        self.probeInterval = probeInterval
    }

    public var isPaused: Bool { state.withLock { $0.paused } }

    /// A read failed: pause, and probe until Postgres answers.
    public func failed() {
        let startProbe = state.withLock { state in
            state.paused = true
            defer { state.probing = true }
            return !state.probing
        }
        guard startProbe else { return }
        let interval = probeInterval
        // Holds the pause only while probing: a worker that shuts down (and drops its
        // checks) ends the probe at its next tick.
        Task { [weak self] in
            while true {
                try? await Task.sleep(for: interval)
                guard let self, !Task.isCancelled else { return }
                if (try? await self.postgres.query("SELECT 1")) != nil {
                    self.state.withLock { $0 = State() }
                    return
                }
            }
        }
    }
}
