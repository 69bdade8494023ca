import Shared

/// One queue stream a worker reads, with the key layout its messages use. A class:
/// every delivery holds its stream's, and a reference is one retain where the
/// struct's strings were one each.
final class StreamContext: Sendable {
    let keys: RedisKeys
    /// The entries of this stream this process works on.
    let held = HeldEntries()
    var stream: String { keys.stream }
    var group: String { RedisKeys.consumerGroup }

    init(keys: RedisKeys) {
        self.keys = keys
    }
}
