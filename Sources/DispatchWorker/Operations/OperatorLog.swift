import Shared
import Synchronization

/// Warnings an operator should see, at most once a minute per kind and subject,
/// so a misconfigured app cannot flood the log.
final class OperatorLog: Sendable {
    private let logger: Logger
    private let interval: Duration
    private let last = Mutex<[String: ContinuousClock.Instant]>([:])

    init(logger: Logger, interval: Duration = .seconds(60)) {
        self.logger = logger
        self.interval = interval
    }

    func warning(_ message: String, key: String, metadata: Logger.Metadata) {
        let now = ContinuousClock.now
        let due = last.withLock { last -> Bool in
            if let previous = last[key], now - previous < interval { return false }
            last[key] = now
            return true
        }
        if due { logger.warning(message, metadata: metadata) }
    }
}
