import Synchronization

/// Postgres stopped answering: a `SELECT 1` got no answer in time while a request
/// waited on it (`PostgresLiveness.value(of:)`).
public struct PostgresNotAnswering: Error, CustomStringConvertible {
    public var description: String { "Postgres does not answer" }
}

/// Waits on work that needs Postgres for as long as Postgres answers, not a fixed
/// time: the admin API's work may rightly run long (an account deleted with millions
/// of subscriptions, an APNs probe), but against a frozen server, a lock it cannot
/// see past or a network dropping everything it would wait as long as they last.
/// While the work has not finished, Postgres is asked `SELECT 1` every `interval`;
/// the first one not answered within `probeLimit` ends the wait.
public final class PostgresLiveness: Sendable {
    private let postgres: PostgresClient
    public let interval: Duration
    public let probeLimit: Duration
    /// The probe under way (or just answered), shared by every waiter: a burst of
    /// waiting requests asks once, not once each.
    private let latest = Mutex<(probe: Task<Bool, Never>, started: ContinuousClock.Instant)?>(nil)

    /// `postgres` should not be the pool the waiting work uses: a pool taken up by
    /// long statements would make a live server look silent.
    public init(postgres: PostgresClient, interval: Duration = .seconds(5), probeLimit: Duration = .seconds(2)) {
        self.postgres = postgres
        self.interval = interval
        self.probeLimit = probeLimit
    }

    /// `work`'s value once it finishes, or `PostgresNotAnswering` once Postgres has
    /// stopped answering. The work is not cancelled: it finishes in its own time
    /// (a write may still commit), as `Task.value(waitingAtMost:)` leaves it.
    public func value<Success: Sendable>(of work: Task<Success, any Error>) async throws -> Success {
        while true {
            do {
                return try await work.value(waitingAtMost: interval)
            } catch is TimeLimitExceeded {
                guard await answers() else { throw PostgresNotAnswering() }
            }
        }
    }

    /// Whether Postgres answers `SELECT 1` within `probeLimit`; an answer from the
    /// last second is reused.
    public func answers() async -> Bool {
        let now = ContinuousClock.now
        let probe = latest.withLock { latest -> Task<Bool, Never> in
            if let (probe, started) = latest, now - started < .seconds(1) { return probe }
            let (postgres, limit) = (postgres, probeLimit)
            let probe = Task {
                (try? await withTimeLimit(limit) { try await postgres.query("SELECT 1").count == 1 }) ?? false
            }
            latest = (probe, now)
            return probe
        }
        return await probe.value
    }
}
