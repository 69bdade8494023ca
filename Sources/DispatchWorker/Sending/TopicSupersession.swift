import Shared

/// RFC 8030 §5.4: a push message with a `Topic` replaces any outstanding message of
/// the same topic. At APNs the topic is the collapse id, and the device keeps the
/// last notification it received of it. A message that APNs failed (429, 5xx, a
/// dropped connection) and that goes out again on a retry could so arrive after a
/// newer one of its topic and replace it on the device.
///
/// Each worker therefore records, per subscription and topic, the acceptance time of
/// the newest message it took up (`mark`, before sending), and a message that waited
/// (`RetriedSubscriptionCheck.needsCheck`) is dropped when a newer one of its topic
/// was taken up meanwhile (`partition`). Marks live an hour, far longer than a
/// message's retries (minutes); only messages with a topic pay for either.
/// Failures only narrow the protection: marks not written, or not readable, leave
/// messages to go out as before.
final class TopicSupersession: Sendable {
    let redis: RedisClient
    private let failures: ThrottledLog
    static let markLifetimeMilliseconds: Int64 = 3_600_000

    init(redis: RedisClient, logger: Logger) {
        self.redis = redis
        failures = ThrottledLog(logger: logger, interval: .seconds(60))
    }

    /// Records the deliveries' topics (those that have one) as taken up, without
    /// waiting: a mark only has to be there by the time an older message's retry comes.
    func mark(_ deliveries: [Delivery]) {
        guard deliveries.contains(where: { $0.message.collapseIDBytes != nil }) else { return }
        var arguments: [any RedisValueConvertible] = [Self.markLifetimeMilliseconds]
        for delivery in deliveries {
            guard let topic = delivery.message.collapseID else { continue }
            arguments.append(delivery.context.keys.topicMark(delivery.message.subscriptionID, topic: topic))
            arguments.append(delivery.message.acceptedAt)
        }
        let (redis, failures) = (redis, failures)
        Task {
            do {
                _ = try await redis.send(.script(Self.markScript, arguments: arguments)).throwingError()
            } catch {
                failures.warning("cannot record topics taken up", error: error)
            }
        }
    }

    /// `deliveries` split into those to send and those a newer message of their topic
    /// replaced.
    func partition(_ deliveries: [Delivery]) async -> (send: [Delivery], replaced: [Delivery]) {
        let topical = deliveries.filter { $0.message.collapseID != nil }
        guard !topical.isEmpty else { return (deliveries, []) }
        let marks: [RedisReply]
        do {
            let keys = topical.map {
                $0.context.keys.topicMark($0.message.subscriptionID, topic: $0.message.collapseID ?? "")
            }
            marks = try await redis.send(RedisCommand("MGET", arguments: keys)).throwingError().array ?? []
        } catch {
            failures.warning("cannot read topics taken up; sending waiting messages", error: error)
            return (deliveries, [])
        }
        var replaced: Set<ObjectIdentifier> = []
        for (delivery, mark) in zip(topical, marks) {
            if let newest = mark.string.flatMap({ Int64($0) }), newest > delivery.message.acceptedAt {
                replaced.insert(ObjectIdentifier(delivery))
            }
        }
        guard !replaced.isEmpty else { return (deliveries, []) }
        var send: [Delivery] = []
        var dropped: [Delivery] = []
        for delivery in deliveries {
            if replaced.contains(ObjectIdentifier(delivery)) { dropped.append(delivery) } else { send.append(delivery) }
        }
        return (send, dropped)
    }

    /// ARGV: 1 the marks' lifetime in ms, then per message its mark's key and its
    /// acceptance time (ms). A mark only moves forward; each write renews its lifetime.
    static let markScript = RedisScript(
        source: """
            for i = 2, #ARGV, 2 do
              local current = redis.call('GET', ARGV[i])
              if not current or tonumber(current) < tonumber(ARGV[i + 1]) then
                redis.call('SET', ARGV[i], ARGV[i + 1], 'PX', ARGV[1])
              end
            end
            return 0
            """)
}
