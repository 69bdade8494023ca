import Shared
import Synchronization

/// One message of a (subscription, Web Push topic) at a time on its way to APNs from
/// this worker. Two messages of a topic sent moments apart over different APNs
/// connections can reach APNs in either order, and the device keeps the last it
/// receives of a collapse id: so a message of a topic whose previous one has no
/// answer yet waits for that answer (`admit`, `finished`), and of several waiting,
/// only the newest is kept (RFC 8030 §5.4: a newer one replaces it). Newest is by
/// acceptance, whatever order messages reach the gate in (a retry after a fresh one,
/// reads whose checks finish out of order): one older than the one on its way, or
/// than the one waiting, is replaced at once. Messages without a topic pass straight
/// through, and so does a second copy of a message already here (an entry claimed
/// again), as it would without the gate. (Other workers are not held: two workers
/// may still send a topic's messages at once.)
final class TopicGate: Sendable {
    /// A topic's message on its way, and the one waiting behind it.
    private struct Slot {
        var inFlight: Delivery
        var waiting: Delivery?
    }

    private let topics = Mutex<[String: Slot]>([:])

    /// How many topics have a message on its way, and how many messages wait behind one.
    var counts: (onTheirWay: Int, waiting: Int) {
        topics.withLock { ($0.count, $0.values.count { $0.waiting != nil }) }
    }

    /// `deliveries` (in queue order) split into those to send now, and those a newer
    /// one replaced; the rest wait behind their topic's message on its way.
    func admit(_ deliveries: [Delivery]) -> (send: [Delivery], replaced: [Delivery]) {
        guard deliveries.contains(where: { $0.topicKey != nil }) else { return (deliveries, []) }
        var send: [Delivery] = []
        var replaced: [Delivery] = []
        topics.withLock { topics in
            for delivery in deliveries {
                guard let key = delivery.topicKey, var slot = topics[key] else {
                    if let key = delivery.topicKey { topics[key] = Slot(inFlight: delivery) }
                    send.append(delivery)
                    continue
                }
                let message = delivery.message
                if message.messageID == slot.inFlight.message.messageID
                    || message.messageID == slot.waiting?.message.messageID
                {
                    send.append(delivery)  // a second copy: not the gate's to order
                    continue
                }
                if message.acceptedAt < slot.inFlight.message.acceptedAt {
                    replaced.append(delivery)
                    continue
                }
                if let waiting = slot.waiting {
                    // The newer of the two waits; on a tie, the later to arrive.
                    guard message.acceptedAt >= waiting.message.acceptedAt else {
                        replaced.append(delivery)
                        continue
                    }
                    replaced.append(waiting)
                }
                slot.waiting = delivery
                topics[key] = slot
            }
        }
        return (send, replaced)
    }

    /// `delivery`'s send was answered (whatever the answer): the message of its topic
    /// waiting behind it, now on its way, if any. Only the message the gate let go
    /// counts (a copy sent past it changes nothing).
    func finished(_ delivery: Delivery) -> Delivery? {
        guard let key = delivery.topicKey else { return nil }
        return topics.withLock { topics in
            guard var slot = topics[key], slot.inFlight === delivery else { return nil }
            guard let waiting = slot.waiting else {
                topics[key] = nil
                return nil
            }
            slot.inFlight = waiting
            slot.waiting = nil
            topics[key] = slot
            return waiting
        }
    }
}
