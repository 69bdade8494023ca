import Foundation
import Shared

/// What happens to the entries of one read: each is decoded into its messages and
/// dead-lettered whole if it cannot be read or was handed out too often; otherwise
/// each message is failed if its TTL passed, or sent, with its outcome recorded; a
/// retry (or one that waited) is dropped instead if its subscription was deleted or
/// its app stopped pushing meanwhile (`RetriedSubscriptionCheck`); and any message with
/// a Web Push topic is dropped once a newer one of its topic was queued
/// (`TopicSupersession`).
/// The checks run in the reader's task (but those that ask Postgres or Redis in the
/// send task, after the messages without them went out); the messages to send go to the sender
/// together in one task, and a `sent` outcome is recorded where the answer arrives,
/// so the common case costs no task per message. Each message holds an in-flight
/// permit (an unreadable entry one) until its entry is settled.
final class EntryProcessor: Sendable {
    let sender: MessageSender
    let recorder: OutcomeRecorder
    let retriedCheck: RetriedSubscriptionCheck
    let topics: TopicSupersession
    let topicGate = TopicGate()
    let maxDeliveries: Int
    /// How long an entry must have been on its stream before being handed out too
    /// often dead-letters it: `WORKER_MAX_DELIVERIES` visibility timeouts, about as
    /// long as that many claims by other workers take. A burst of restarts (a worker
    /// crash-looping, a deploy) hands every entry a worker held out again within
    /// seconds, which says nothing against them; they are sent again instead. An entry
    /// that kills every worker taking it still goes once that time has passed.
    let deadLetterAgeMilliseconds: Int64

    init(
        sender: MessageSender, recorder: OutcomeRecorder, retriedCheck: RetriedSubscriptionCheck,
        topics: TopicSupersession, maxDeliveries: Int, deadLetterAgeMilliseconds: Int64
    ) {
        self.deadLetterAgeMilliseconds = deadLetterAgeMilliseconds
        self.sender = sender
        self.recorder = recorder
        self.retriedCheck = retriedCheck
        self.topics = topics
        self.maxDeliveries = maxDeliveries
    }

    /// Starts work on `entries`; returns the in-flight permits it holds for them
    /// (one per message, one per unreadable entry), which the reader took or takes.
    func start(_ entries: [StreamEntry], context: StreamContext) -> Int {
        guard !entries.isEmpty else { return 0 }
        // Held until acknowledged or dead-lettered (`Acknowledger`, `OutcomeRecorder`).
        context.held.insert(entries.lazy.map(\.id))
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        var sends: [Delivery] = []
        sends.reserveCapacity(entries.count)
        // Messages that waited, checked before they go (usually none: a fresh read holds
        // first attempts only).
        var waited: [Delivery] = []
        var permits = 0
        for entry in entries {
            guard let messages = decode(entry, context: context) else {
                permits += 1
                continue
            }
            permits += messages.count
            if entry.deliveryCount > maxDeliveries,
                now - (entry.addedAtMilliseconds ?? 0) >= deadLetterAgeMilliseconds
            {
                let recorder = recorder
                Task {
                    await recorder.deadLetter(
                        entry, messages: messages, permits: messages.count,
                        reason: "handed out \(entry.deliveryCount) times without an outcome",
                        metricReason: "deliveries", context: context)
                }
                continue
            }
            let pending = PendingEntry(id: entry.id, context: context, messageCount: messages.count)
            for message in messages {
                let delivery = Delivery(entry: pending, message: message)
                if let known = message.knownOutcome.flatMap(KnownOutcome.outcome(of:)) {
                    // APNs answered before; only writing it failed. Written now, not sent again.
                    let recorder = recorder
                    Task { await recorder.record(known, delivery) }
                } else if now > OutcomeRecorder.deadline(of: message) {
                    let recorder = recorder
                    Task { await recorder.record(.failed(.expired, detail: "expired"), delivery) }
                } else if entry.deliveryCount > 1 || RetriedSubscriptionCheck.needsCheck(message, nowMilliseconds: now)
                {
                    // Handed out before: a worker may have crashed with it moments ago,
                    // and a revocation landed in between, however fresh it is.
                    waited.append(delivery)
                } else {
                    sends.append(delivery)
                }
            }
        }
        guard !sends.isEmpty || !waited.isEmpty else { return permits }
        let (sender, recorder, retriedCheck, topics, topicGate) = (sender, recorder, retriedCheck, topics, topicGate)
        let completion = self.completion
        Task {
            // Messages with a topic wait for one read of their topics' marks, then for
            // their topic's message in flight (`TopicGate`); the rest go now.
            let sendCurrent = { (deliveries: [Delivery]) in
                let (current, replaced) = await topics.partition(deliveries)
                for delivery in replaced { await recorder.record(.replaced, delivery) }
                let (admitted, superseded) = topicGate.admit(current)
                for delivery in superseded { await recorder.record(.replaced, delivery) }
                await sender.send(admitted, completion: completion)
            }
            if sends.contains(where: { $0.message.hasCollapseID }) {
                await sender.send(sends.filter { !$0.message.hasCollapseID }, completion: completion)
                await sendCurrent(sends.filter(\.message.hasCollapseID))
            } else {
                await sender.send(sends, completion: completion)
            }
            guard !waited.isEmpty else { return }
            let (live, dropped) = await retriedCheck.partition(waited)
            for (delivery, outcome) in dropped { await recorder.record(outcome, delivery) }
            await sendCurrent(live)
        }
        return permits
    }

    /// Records a send's outcome where it arrives (the common case costs no task) and,
    /// for a message with a topic, sends the one of its topic held behind it.
    private var completion: MessageSender.Completion {
        { [recorder, topicGate] delivery, outcome in
            if !recorder.recordAtOnce(outcome, delivery) { Task { await recorder.record(outcome, delivery) } }
            guard delivery.topicKey != nil, let next = topicGate.finished(delivery) else { return }
            Task { await self.sendHeld(next) }
        }
    }

    /// Sends a message the gate held, unless its TTL passed while it waited, a newer
    /// message of its topic was queued meanwhile (through another worker, say: its
    /// marks are read again, since they were read when it arrived), or, having waited
    /// like any other (`RetriedSubscriptionCheck.needsCheck`), its subscription was
    /// deleted or its app stopped pushing; then the one held behind it, if any, goes
    /// in its place.
    private func sendHeld(_ held: Delivery) async {
        var delivery = held
        while true {
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            if now > OutcomeRecorder.deadline(of: delivery.message) {
                await recorder.record(.failed(.expired, detail: "expired"), delivery)
            } else if await !topics.partition([delivery]).replaced.isEmpty {
                await recorder.record(.replaced, delivery)
            } else if RetriedSubscriptionCheck.needsCheck(delivery.message, nowMilliseconds: now),
                let (_, outcome) = await retriedCheck.partition([delivery], nowMilliseconds: now).dropped.first
            {
                await recorder.record(outcome, delivery)
            } else {
                break
            }
            guard let next = topicGate.finished(delivery) else { return }
            delivery = next
        }
        await sender.send([delivery], completion: completion)
    }

    /// The entry's messages, or nil when it cannot be read (it is dead-lettered).
    private func decode(_ entry: StreamEntry, context: StreamContext) -> [QueueMessage]? {
        do {
            return try QueueMessage.messages(in: entry.fields)
        } catch {
            let recorder = recorder
            Task {
                await recorder.deadLetter(
                    entry, messages: [], permits: 1, reason: "unreadable: \(error.description)",
                    metricReason: "unreadable", context: context)
            }
            return nil
        }
    }
}
