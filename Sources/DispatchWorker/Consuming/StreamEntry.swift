import Shared

/// One entry read from a queue stream (or claimed from a crashed worker), before
/// its fields are decoded.
struct StreamEntry: Sendable {
    /// The stream entry id, e.g. `1700000000000-0`.
    let id: String
    /// The flat `[field, value, field, value…]` list, binary safe.
    let fields: StreamEntryFields
    /// How often the consumer group has handed it out, this time included.
    let deliveryCount: Int

    /// Entries of an `XREADGROUP`/`XRANGE`-shaped list: `[[id, [fields…]], …]`.
    /// Reads the reply in place (pattern matching, no intermediate copies).
    static func list(_ reply: RedisReply?, deliveryCount: Int) -> [StreamEntry] {
        guard case .array(let items)? = reply else { return [] }
        var entries: [StreamEntry] = []
        entries.reserveCapacity(items.count)
        for item in items {
            guard case .array(let parts) = item, parts.count >= 2, case .bulk(let id) = parts[0],
                case .array(let values) = parts[1]
            else { continue }
            var fields = StreamEntryFields()
            for value in values {
                if case .bulk(let bytes) = value { fields.append(bytes) }
            }
            entries.append(
                StreamEntry(id: String(decoding: id, as: UTF8.self), fields: fields, deliveryCount: deliveryCount))
        }
        return entries
    }

    /// Milliseconds since 1970 encoded in the id (the time Redis added it).
    var addedAtMilliseconds: Int64? { Self.milliseconds(ofID: id) }

    static func milliseconds(ofID id: String) -> Int64? {
        guard let dash = id.firstIndex(of: "-") else { return Int64(id) }
        return Int64(id[..<dash])
    }
}
