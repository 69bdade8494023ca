import Shared

/// One queue stream a worker reads, with the key layout its messages use.
struct StreamContext: Sendable {
    let keys: RedisKeys
    var stream: String { keys.stream }
    var group: String { RedisKeys.consumerGroup }
}
