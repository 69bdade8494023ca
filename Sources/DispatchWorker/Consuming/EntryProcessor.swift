import Foundation
import Shared

/// What happens to the entries of one read: each is decoded, dead-lettered if it
/// cannot be read or was handed out too often, failed if its TTL passed, and
/// otherwise sent, with its outcome recorded. The checks run in the reader's task;
/// the entries to send go to the sender together in one task, and a `sent`
/// outcome is recorded where the answer arrives, so the common case costs no task
/// per entry. The reader took an in-flight permit per entry; the recorder gives it back.
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
        var sends: [Delivery] = []
        sends.reserveCapacity(entries.count)
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
                sends.append(delivery)
            }
        }
        guard !sends.isEmpty else { return }
        let (sender, recorder) = (sender, recorder)
        Task {
            await sender.send(sends) { delivery, outcome in
                guard !recorder.recordAtOnce(outcome, delivery) else { return }
                Task { await recorder.record(outcome, delivery) }
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
}
