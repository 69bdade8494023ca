import Synchronization

/// Bounds the messages on their way to one APNs destination (a credential in one
/// environment) at once. The worker's in-flight permits are shared by every app,
/// and the queue is one line: a destination that answers slowly or not at all (up
/// to the APNs request timeout, 15 s) would otherwise take every permit and hold
/// every other app's messages behind its own (a probe saw another app's
/// notifications 12 s late behind one whose APNs took 5 s to answer). Messages past
/// the bound are postponed through the delayed-retry set (`MessageSender`), using
/// no attempt; those of other destinations go on.
final class DestinationSlots: Sendable {
    let limit: Int
    private let inUse = Mutex<[String: Int]>([:])

    init(limit: Int) {
        precondition(limit >= 1)
        self.limit = limit
    }

    /// The destination of a message: its credential and environment.
    static func key(credentialID: String, sandbox: Bool) -> String {
        credentialID + (sandbox ? ":sandbox" : ":production")
    }

    /// Takes up to `wanted` slots of `key`; returns how many it got.
    func take(_ key: String, upTo wanted: Int) -> Int {
        inUse.withLock { inUse in
            let used = inUse[key, default: 0]
            let granted = max(0, min(wanted, limit - used))
            if granted > 0 { inUse[key] = used + granted }
            return granted
        }
    }

    /// Gives one slot of `key` back (its message was answered).
    func give(_ key: String) {
        inUse.withLock { inUse in
            let left = inUse[key, default: 1] - 1
            inUse[key] = left > 0 ? left : nil
        }
    }

    /// Slots of `key` in use.
    func used(_ key: String) -> Int { inUse.withLock { $0[key, default: 0] } }
}
