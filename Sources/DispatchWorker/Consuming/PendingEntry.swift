import Shared
import Synchronization

/// A queue entry whose messages are being worked on (a format-4 entry holds every
/// push of one hot-path run; older formats one). The consumer group knows entries,
/// not messages, so the entry is acknowledged once, when the last of its messages
/// has settled: their outcomes then go to Redis together, in one
/// `QueueScripts.acknowledge` item guarded by the entry's `XACK` (applied once
/// however often the write is repeated).
///
/// A message whose outcome could not be written (a Postgres or Redis failure)
/// keeps the whole entry pending, and the settled outcomes of the others
/// are dropped unwritten: whoever claims the entry sends all of its messages again,
/// which at-least-once delivery allows, and releases no quota twice.
final class PendingEntry: Sendable {
    let id: String
    let context: StreamContext
    /// Its messages, and the in-flight permits it holds until it is settled.
    let messageCount: Int

    private struct State {
        var remaining: Int
        var settled: [Acknowledgement.Item] = []
        var leftPending = false
    }
    private let state: Mutex<State>

    /// How the entry ended once its last message settled.
    enum Completion {
        /// Every message has an outcome to write with the acknowledgement.
        case acknowledge([Acknowledgement.Item])
        /// Some message was left for another worker: write nothing.
        case leavePending
    }

    init(id: String, context: StreamContext, messageCount: Int) {
        precondition(messageCount >= 1)
        self.id = id
        self.context = context
        self.messageCount = messageCount
        var initial = State(remaining: messageCount)
        initial.settled.reserveCapacity(messageCount)
        state = Mutex(initial)
    }

    /// Records one message's outcome; returns the entry's completion when it was the last.
    func settle(_ item: Acknowledgement.Item) -> Completion? {
        state.withLock { state in
            state.settled.append(item)
            return Self.next(&state)
        }
    }

    /// Records that one message is left for another worker; returns the entry's
    /// completion when it was the last.
    func leavePending() -> Completion? {
        state.withLock { state in
            state.leftPending = true
            return Self.next(&state)
        }
    }

    private static func next(_ state: inout State) -> Completion? {
        state.remaining -= 1
        precondition(state.remaining >= 0, "a message of a queue entry settled twice")
        guard state.remaining == 0 else { return nil }
        if state.leftPending { return .leavePending }
        defer { state.settled = [] }
        return .acknowledge(state.settled)
    }
}
