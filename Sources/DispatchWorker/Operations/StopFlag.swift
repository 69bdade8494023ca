import Synchronization

/// Set once when the worker starts stopping; read from anywhere (readiness, loops).
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)

    var isSet: Bool { flag.load(ordering: .relaxed) }

    /// Sets it; true for the first caller only.
    func set() -> Bool { !flag.exchange(true, ordering: .relaxed) }
}
