import Shared

/// One message being worked on: the entry it came in, and the message decoded.
/// A class, so the tasks and batches it passes through share it rather than copy
/// (and retain) each of its strings.
final class Delivery: Sendable {
    let entry: PendingEntry
    let message: QueueMessage
    /// The message's last-push key, made here while its buffer is in cache: counting
    /// the outcome later (on another thread) then reads only this object.
    let subscriptionKey: DailyCounts.SubscriptionKey
    /// Subscription and Web Push topic, for a message with one (`TopicGate`): made here
    /// once, not on the APNs thread that answers it.
    let topicKey: String?

    var context: StreamContext { entry.context }

    init(entry: PendingEntry, message: QueueMessage) {
        self.entry = entry
        self.message = message
        subscriptionKey = DailyCounts.SubscriptionKey(message)
        topicKey = message.hasCollapseID ? message.subscriptionID + "\u{0}" + (message.collapseID ?? "") : nil
    }
}
