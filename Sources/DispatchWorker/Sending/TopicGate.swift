import Shared
import Synchronization

/// One message of a (subscription, Web Push topic) at a time on its way to APNs from
/// this worker. Two messages of a topic sent moments apart over different APNs
/// connections can reach APNs in either order, and the device keeps the last it
/// receives of a collapse id: so a message of a topic whose previous one has no
/// answer yet waits for that answer (`admit`, `finished`), and of several waiting,
/// only the newest is kept (RFC 8030 §5.4: a newer one replaces it). Messages without
/// a topic pass straight through. (Other workers are not held: two workers may still
/// send a topic's messages at once.)
final class TopicGate: Sendable {
    private struct Key: Hashable {
        let subscription: String
        let topic: String
    }

    /// The topics with a message in flight, and the newest one waiting behind it.
    private let topics = Mutex<[Key: Delivery?]>([:])

    /// `deliveries` (in queue order) split into those to send now, those to hold
    /// behind their topic's message in flight, and those a newer held one replaced.
    func admit(_ deliveries: [Delivery]) -> (send: [Delivery], replaced: [Delivery]) {
        guard deliveries.contains(where: { $0.message.hasCollapseID }) else { return (deliveries, []) }
        var send: [Delivery] = []
        var replaced: [Delivery] = []
        topics.withLock { topics in
            for delivery in deliveries {
                guard let key = Self.key(delivery) else {
                    send.append(delivery)
                    continue
                }
                switch topics[key] {
                case nil:
                    topics[key] = .some(nil)
                    send.append(delivery)
                case let waiting?:
                    if let waiting { replaced.append(waiting) }
                    topics[key] = delivery
                }
            }
        }
        return (send, replaced)
    }

    /// `delivery`'s send was answered (whatever the answer): the message of its topic
    /// held behind it, now to send, if any.
    func finished(_ delivery: Delivery) -> Delivery? {
        guard let key = Self.key(delivery) else { return nil }
        return topics.withLock { topics in
            guard case let waiting?? = topics[key] else {
                topics[key] = nil
                return nil
            }
            topics[key] = .some(nil)  // the waiting one is in flight now
            return waiting
        }
    }

    private static func key(_ delivery: Delivery) -> Key? {
        guard let topic = delivery.message.collapseID else { return nil }
        return Key(subscription: delivery.message.subscriptionID, topic: topic)
    }
}
