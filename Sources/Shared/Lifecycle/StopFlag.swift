import Synchronization

/// Set once when a service starts stopping; read from anywhere (readiness, loops,
/// waits that must end early).
public final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)

    public init() {}

    public var isSet: Bool { flag.load(ordering: .relaxed) }

    /// Sets it; true for the first caller only.
    @discardableResult
    public func set() -> Bool { !flag.exchange(true, ordering: .relaxed) }
}
