import Shared
import Synchronization

/// A queue entry whose messages are being worked on (a format-4 entry holds every
/// push of one hot-path run; older formats one). The consumer group knows entries,
/// not messages, so the entry is acknowledged once, when the last of its messages
/// has settled: their outcomes then go to Redis together, in one
/// `QueueScripts.acknowledge` item guarded by the entry's `XACK` (applied once
/// however often the write is repeated). Every message settles: a send that cannot
/// finish, or whose outcome cannot be written, settles as a retry of its own.
final class PendingEntry: Sendable {
    let id: String
    let context: StreamContext
    /// Its messages, and the in-flight permits it holds until it is acknowledged.
    let messageCount: Int

    private struct State {
        var remaining: Int
        var settled: [Acknowledgement.Item] = []
    }
    private let state: Mutex<State>

    init(id: String, context: StreamContext, messageCount: Int) {
        precondition(messageCount >= 1)
        self.id = id
        self.context = context
        self.messageCount = messageCount
        var initial = State(remaining: messageCount)
        initial.settled.reserveCapacity(messageCount)
        state = Mutex(initial)
    }

    /// Records one message's outcome; returns every message's once it was the last.
    func settle(_ item: Acknowledgement.Item) -> [Acknowledgement.Item]? {
        state.withLock { state in
            state.settled.append(item)
            state.remaining -= 1
            precondition(state.remaining >= 0, "a message of a queue entry settled twice")
            guard state.remaining == 0 else { return nil }
            defer { state.settled = [] }
            return state.settled
        }
    }
}
