import Foundation
import Shared

/// What happens to one entry: read it, dead-letter it if it cannot be read or was
/// handed out too often, drop it if its TTL passed, otherwise send it and record
/// the outcome. The caller took an in-flight permit; the recorder gives it back.
struct EntryProcessor: Sendable {
    let sender: MessageSender
    let recorder: OutcomeRecorder
    let maxDeliveries: Int

    func process(_ entry: StreamEntry, context: StreamContext) async {
        let message: QueueMessage
        do {
            message = try QueueMessage(fields: entry.fields)
        } catch {
            await recorder.deadLetter(
                entry, message: nil, reason: "unreadable: \(error.description)", metricReason: "unreadable",
                context: context)
            return
        }
        if entry.deliveryCount > maxDeliveries {
            await recorder.deadLetter(
                entry, message: message,
                reason: "handed out \(entry.deliveryCount) times without an outcome", metricReason: "deliveries",
                context: context)
            return
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        if now > OutcomeRecorder.deadline(of: message) {
            await recorder.record(
                .failed(.expired, detail: "expired"), message: message, entry: entry, context: context)
            return
        }
        let outcome = await sender.send(message)
        await recorder.record(outcome, message: message, entry: entry, context: context)
    }
}
