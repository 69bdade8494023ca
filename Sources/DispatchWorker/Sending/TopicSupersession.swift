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
/// was taken up meanwhile (`partition`). A subscription's marks are one hash, deleted
/// with the subscription (`RedisKeys.subscriptionState`), living an hour past its last
/// mark (far longer than a message's retries, minutes) and holding at most
/// `maximumMarks` topics (a sender inventing a topic per message starts it afresh).
/// Only messages with a topic pay for either. Failures only narrow the protection:
/// marks not written, or not readable, leave messages to go out as before.
final class TopicSupersession: Sendable {
    let redis: RedisClient
    private let failures: ThrottledLog
    static let markLifetimeMilliseconds: Int64 = 3_600_000
    static let maximumMarks = 256

    init(redis: RedisClient, logger: Logger) {
        self.redis = redis
        failures = ThrottledLog(logger: logger, interval: .seconds(60))
    }

    /// Records the deliveries' topics (those that have one) as taken up, without
    /// waiting: a mark only has to be there by the time an older message's retry comes.
    func mark(_ deliveries: [Delivery]) {
        guard deliveries.contains(where: { $0.message.collapseIDBytes != nil }) else { return }
        var arguments: [any RedisValueConvertible] = [Self.markLifetimeMilliseconds, Self.maximumMarks]
        for delivery in deliveries {
            guard let topic = delivery.message.collapseID else { continue }
            arguments.append(delivery.context.keys.topicMarks(delivery.message.subscriptionID))
            arguments.append(topic)
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
        let topical = deliveries.filter { $0.message.collapseIDBytes != nil }
        guard !topical.isEmpty else { return (deliveries, []) }
        var arguments: [any RedisValueConvertible] = []
        for delivery in topical {
            arguments.append(delivery.context.keys.topicMarks(delivery.message.subscriptionID))
            arguments.append(delivery.message.collapseID ?? "")
        }
        let marks: [RedisReply]
        do {
            marks = try await redis.send(.script(Self.readScript, arguments: arguments)).throwingError().array ?? []
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

    /// ARGV: 1 the marks' lifetime in ms, 2 the most topics a hash holds, then per
    /// message its subscription's hash, its topic and its acceptance time (ms). A mark
    /// only moves forward; each write renews the hash's lifetime.
    static let markScript = RedisScript(
        source: """
            for i = 3, #ARGV, 3 do
              local key, topic, at = ARGV[i], ARGV[i + 1], ARGV[i + 2]
              local current = redis.call('HGET', key, topic)
              if not current or tonumber(current) < tonumber(at) then
                if not current and redis.call('HLEN', key) >= tonumber(ARGV[2]) then redis.call('DEL', key) end
                redis.call('HSET', key, topic, at)
              end
              redis.call('PEXPIRE', key, ARGV[1])
            end
            return 0
            """)

    /// ARGV: per message its subscription's hash and its topic. Returns each mark or nil.
    static let readScript = RedisScript(
        source: """
            local marks = {}
            for i = 1, #ARGV, 2 do
              marks[#marks + 1] = redis.call('HGET', ARGV[i], ARGV[i + 1]) or ''
            end
            return marks
            """)
}
