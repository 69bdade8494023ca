import Synchronization

/// The ids of the entries of one stream this process works on: read or claimed,
/// and not yet acknowledged or dead-lettered. An entry pending under this worker's
/// name that is not among them is an orphan, which `QueueConsumer` takes back: a
/// read or claim whose answer was lost (a timeout while Redis stalled, a broken
/// connection) may still have run in Redis, handing entries to this name that no
/// task here will ever send. Without the sweep they waited for the visibility timeout.
final class HeldEntries: Sendable {
    private let ids = Mutex<Set<String>>([])

    func insert<Entries: Sequence>(_ entries: Entries) where Entries.Element == String {
        ids.withLock { ids in
            for id in entries { ids.insert(id) }
        }
    }

    func remove<Entries: Sequence>(_ entries: Entries) where Entries.Element == String {
        ids.withLock { ids in
            for id in entries { ids.remove(id) }
        }
    }

    /// Of `candidates`, those not held.
    func notHeld(_ candidates: [String]) -> [String] {
        ids.withLock { ids in candidates.filter { !ids.contains($0) } }
    }
}
