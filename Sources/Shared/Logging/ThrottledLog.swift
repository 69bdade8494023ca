import Synchronization

/// Logs a recurring failure (Redis down…) at most once per interval, counting
/// what was left out, so an outage does not turn into a log line per request.
public final class ThrottledLog: Sendable {
    private let logger: Logger
    private let interval: Duration
    private let state = Mutex<(last: ContinuousClock.Instant?, suppressed: Int)>((nil, 0))

    public init(logger: Logger, interval: Duration = .seconds(5)) {
        self.logger = logger
        self.interval = interval
    }

    public func warning(_ message: String, error: any Error) {
        warning(message, metadata: ["error": Self.describe(error)])
    }

    public func warning(_ message: String, metadata: Logger.Metadata = [:]) {
        guard let suppressed = due() else { return }
        logger.warning(message, metadata: metadata.merging(["suppressed": String(suppressed)]) { $1 })
    }

    /// As `warning`, for what recovered by itself (worth knowing, not worth a line each).
    public func info(_ message: String, metadata: Logger.Metadata = [:]) {
        guard let suppressed = due() else { return }
        logger.info(message, metadata: metadata.merging(["suppressed": String(suppressed)]) { $1 })
    }

    /// As `warning`, for a failure an operator must fix (a wrong key, say).
    public func error(_ message: String, metadata: Logger.Metadata = [:]) {
        guard let suppressed = due() else { return }
        logger.error(message, metadata: metadata.merging(["suppressed": String(suppressed)]) { $1 })
    }

    /// How many lines were left out since the last one, if one is due now.
    private func due() -> Int? {
        let now = ContinuousClock.now
        let suppressed: Int? = state.withLock { state in
            if let last = state.last, now - last < interval {
                state.suppressed += 1
                return nil
            }
            let count = state.suppressed
            state = (now, 0)
            return count
        }
        return suppressed
    }

    /// The error's own safe description (Redis and Postgres errors never carry values).
    public static func describe(_ error: any Error) -> String {
        switch error {
        case let error as RedisError: error.description
        case let error as PostgresError: error.description
        case let error as ConnectionPoolError: "\(error)"
        default: "\(type(of: error))"
        }
    }
}
