import Shared
import Synchronization

/// The waited-message checks' view of Postgres: after a read failed, they skip it
/// (the messages go out unchecked) rather than make every later batch wait on a dead
/// or unreachable database, and a probe in the background (`SELECT 1` every
/// `probeInterval`) ends the pause as soon as Postgres answers again, so the checks
/// resume within a second of its return rather than after a fixed time.
final class PostgresPause: Sendable {
    private let postgres: PostgresClient
    let probeInterval: Duration
    private struct State {
        var paused = false
        var probing = false
    }
    private let state = Mutex(State())

    init(postgres: PostgresClient, probeInterval: Duration = .seconds(1)) {
        self.postgres = postgres
        self.probeInterval = probeInterval
    }

    var isPaused: Bool { state.withLock { $0.paused } }

    /// A read failed: pause, and probe until Postgres answers.
    func failed() {
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
