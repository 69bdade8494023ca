import Shared

/// One entry read from a queue stream (or claimed from a crashed worker), before
/// its fields are decoded.
struct StreamEntry: Sendable {
    /// The stream entry id, e.g. `1700000000000-0`.
    let id: String
    /// The flat `[field, value, field, value…]` list, binary safe.
    let fields: [[UInt8]]
    /// How often the consumer group has handed it out, this time included.
    let deliveryCount: Int

    /// Entries of an `XREADGROUP`/`XRANGE`-shaped list: `[[id, [fields…]], …]`.
    static func list(_ reply: RedisReply?, deliveryCount: Int) -> [StreamEntry] {
        (reply?.array ?? []).compactMap { item in
            guard let parts = item.array, parts.count >= 2, let id = parts[0].string else { return nil }
            return StreamEntry(id: id, fields: parts[1].array?.compactMap(\.bytes) ?? [], deliveryCount: deliveryCount)
        }
    }

    /// Milliseconds since 1970 encoded in the id (the time Redis added it).
    var addedAtMilliseconds: Int64? { Self.milliseconds(ofID: id) }

    static func milliseconds(ofID id: String) -> Int64? {
        guard let dash = id.firstIndex(of: "-") else { return Int64(id) }
        return Int64(id[..<dash])
    }
}
