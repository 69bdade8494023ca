import Synchronization

/// When something (a read from Postgres, say) last failed, so that callers can skip
/// or stop waiting for it for `quietPeriod` after: while a server stays away, each
/// attempt would otherwise cost its own timeout.
public final class RecentFailure: Sendable {
    private let last = Mutex<ContinuousClock.Instant?>(nil)
    public let quietPeriod: Duration

    public init(quietPeriod: Duration) {
        self.quietPeriod = quietPeriod
    }

    public func record() {
        last.withLock { $0 = .now }
    }

    /// A success: the quiet period, if any, ends now.
    public func clear() {
        last.withLock { $0 = nil }
    }

    public var isRecent: Bool {
        guard let last = last.withLock({ $0 }) else { return false }
        return ContinuousClock.now - last < quietPeriod
    }
}
