import Foundation
import Shared

/// What happens to the entries of one read: each is decoded, dead-lettered if it
/// cannot be read or was handed out too often, failed if its TTL passed, and
/// otherwise sent, each in a task of its own, with its outcome recorded. The
/// checks run in the reader's task, so a batch costs one pass plus a task per
/// entry. The reader took an in-flight permit per entry; the recorder gives it back.
final class EntryProcessor: Sendable {
    let sender: MessageSender
    let recorder: OutcomeRecorder
    let maxDeliveries: Int

    init(sender: MessageSender, recorder: OutcomeRecorder, maxDeliveries: Int) {
        self.sender = sender
        self.recorder = recorder
        self.maxDeliveries = maxDeliveries
    }

    func start(_ entries: [StreamEntry], context: StreamContext) {
        guard !entries.isEmpty else { return }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for entry in entries {
            guard let message = decode(entry, context: context) else { continue }
            let delivery = Delivery(entry: entry, message: message, context: context)
            if entry.deliveryCount > maxDeliveries {
                let recorder = recorder
                Task {
                    await recorder.deadLetter(
                        delivery.entry, message: delivery.message,
                        reason: "handed out \(delivery.entry.deliveryCount) times without an outcome",
                        metricReason: "deliveries", context: delivery.context)
                }
            } else if now > OutcomeRecorder.deadline(of: message) {
                let recorder = recorder
                Task { await recorder.record(.failed(.expired, detail: "expired"), delivery) }
            } else {
                Task { await self.send(delivery) }
            }
        }
    }

    /// The entry's message, or nil when it cannot be read (it is dead-lettered).
    private func decode(_ entry: StreamEntry, context: StreamContext) -> QueueMessage? {
        do {
            return try QueueMessage(entry: entry.fields)
        } catch {
            let recorder = recorder
            Task {
                await recorder.deadLetter(
                    entry, message: nil, reason: "unreadable: \(error.description)", metricReason: "unreadable",
                    context: context)
            }
            return nil
        }
    }

    private func send(_ delivery: Delivery) async {
        let outcome = await sender.send(delivery)
        await recorder.record(outcome, delivery)
    }
}
