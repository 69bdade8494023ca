import Shared

/// One message being worked on: its entry, decoded, and the stream it came from.
/// A class, so the tasks and batches it passes through share it rather than copy
/// (and retain) each of its strings.
final class Delivery: Sendable {
    let entry: StreamEntry
    let message: QueueMessage
    let context: StreamContext

    init(entry: StreamEntry, message: QueueMessage, context: StreamContext) {
        self.entry = entry
        self.message = message
        self.context = context
    }
}
