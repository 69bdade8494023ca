import Shared

/// RFC 8030 §5.4: a push message with a `Topic` replaces any outstanding message of
/// the same topic. At APNs the topic is the collapse id, and the device keeps the
/// last notification it received of it: a message sent after a newer one of its
/// topic (a retry after APNs failed it, one put back at a worker's stop, or simply
/// read in the same batch) would replace the newer one on the device.
///
/// The hot-path script records, per subscription and topic, the id and acceptance
/// time of the newest message it queued (`RedisKeys.topicMarks`, in Redis's own
/// order). Before a message with a topic goes out, its topic's mark is read: a mark
/// naming another message means a newer one was queued, and this one is dropped
/// (`partition`), unless the mark's message was accepted before this one: then this
/// one was queued without a mark of its own (by an ingress of an older version during
/// a rolling upgrade, or its mark's write failed), and it is the newer. One read per
/// batch of such messages; messages without a topic cost a flag test. A mark that is
/// gone (expired a day on, or the marks started afresh) lets the message go; a read
/// that fails lets every message go, as before.
final class TopicSupersession: Sendable {
    let redis: RedisClient
    private let failures: ThrottledLog

    init(redis: RedisClient, logger: Logger) {
        self.redis = redis
        failures = ThrottledLog(logger: logger, interval: .seconds(60))
    }

    /// `deliveries` (of one stream) split into those to send and those a newer message
    /// of their topic replaced.
    func partition(_ deliveries: [Delivery]) async -> (send: [Delivery], replaced: [Delivery]) {
        guard let first = deliveries.first(where: { $0.message.hasCollapseID }) else { return (deliveries, []) }
        let keys = first.context.keys
        var arguments: [any RedisValueConvertible] = [keys.prefix + RedisKeys.topicMarksPrefix]
        for delivery in deliveries {
            guard let topic = delivery.message.collapseID else { continue }
            arguments.append(delivery.message.subscriptionID)
            arguments.append(topic)
        }
        let marks: [RedisReply]
        do {
            // The stream as the key: every mark shares its hash tag (its Cluster slot).
            let reply = try await redis.send(.script(Self.readScript, keys: [keys.stream], arguments: arguments))
            marks = try reply.throwingError().array ?? []
        } catch {
            failures.warning("cannot read topic marks; sending messages with a topic as they come", error: error)
            return (deliveries, [])
        }
        // The marks follow the messages with a topic, in order.
        var send: [Delivery] = []
        var dropped: [Delivery] = []
        var nextMark = marks.makeIterator()
        for delivery in deliveries {
            let mark = delivery.message.hasCollapseID ? nextMark.next()?.string : nil
            if let mark, Self.replaces(mark, delivery.message) {
                dropped.append(delivery)
            } else {
                send.append(delivery)
            }
        }
        return (send, dropped)
    }

    /// Whether `mark` (`<message id>:<accepted at ms>`, or `''` for none) names a newer
    /// message than `message`: another one, accepted no earlier.
    static func replaces(_ mark: String, _ message: QueueMessage) -> Bool {
        guard let colon = mark.lastIndex(of: ":"), let acceptedAt = Int64(mark[mark.index(after: colon)...]) else {
            return false
        }
        return mark[..<colon] != message.messageID && acceptedAt >= message.acceptedAt
    }

    /// KEYS: 1 the stream (for its slot). ARGV: 1 the marks' key prefix, then per
    /// message its subscription id and topic. Returns each mark, `''` for none (a nil
    /// would end the Lua table there).
    static let readScript = RedisScript(
        source: """
            local marks = {}
            for i = 2, #ARGV, 2 do
              marks[#marks + 1] = redis.call('HGET', ARGV[1] .. ARGV[i], ARGV[i + 1]) or ''
            end
            return marks
            """)
}
