import Synchronization

/// A lock-free count of sent messages between two metric flushes.
final class SentCounter: Sendable {
    private let value = Atomic<Int>(0)

    func add(_ count: Int = 1) { value.add(count, ordering: .relaxed) }

    /// The count so far, reset to zero.
    func take() -> Int { value.exchange(0, ordering: .relaxed) }
}
