import Shared

/// One message being worked on: its entry, decoded, and the stream it came from.
/// A class, so the tasks and batches it passes through share it rather than copy
/// (and retain) each of its strings.
final class Delivery: Sendable {
    let entry: StreamEntry
    let message: QueueMessage
    let context: StreamContext
    /// The message's last-push key, made here while its buffer is in cache: counting
    /// the outcome later (on another thread) then reads only this object.
    let subscriptionKey: DailyCounts.SubscriptionKey

    init(entry: StreamEntry, message: QueueMessage, context: StreamContext) {
        self.entry = entry
        self.message = message
        self.context = context
        subscriptionKey = DailyCounts.SubscriptionKey(message)
    }
}
