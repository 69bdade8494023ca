import Shared

/// Collects the entries of an `XREADGROUP … STREAMS <one stream> >` reply as
/// hiredis parses it, `[[stream, [[id, [field, value…]], …]]]` (null when the
/// block timed out), straight into `StreamEntry` values: no reply tree, and two
/// buffers per entry for its fields. An entry whose fields are not an array
/// (deleted while pending) is skipped.
///
/// The fields' sizes are only known once they are read, so each entry's buffer is
/// sized after the one before (entries of one queue are alike): a buffer too small
/// for a 4 KB ciphertext would be reallocated and copied, twice.
final class StreamReadVisitor: RedisReplyVisitor, @unchecked Sendable {
    // @unchecked: used by one read at a time (on the connection's queue), then read
    // by the caller after that read returned.
    // Touched for every value of the reply, by one read at a time: the runtime's
    // exclusivity check is skipped for these.
    @exclusivity(unchecked) private(set) var entries: [StreamEntry] = []
    private let deliveryCount: Int
    private var id: String?
    @exclusivity(unchecked) private var fields = StreamEntryFields()
    private var fieldsExpected = 0
    private var fieldsSeen = 0
    /// The bytes the next entry's buffer is made for: the last entry's, plus a quarter.
    private(set) var expectedEntryBytes: Int

    /// `expectedEntryBytes`: the previous read's, so its first entry is sized too.
    init(deliveryCount: Int, expectedEntryBytes: Int = 768) {
        self.deliveryCount = deliveryCount
        self.expectedEntryBytes = expectedEntryBytes
    }

    // Depths: 0 the reply, 1 the stream, 2 its name and entry list, 3 an entry,
    // 4 its id and field list, 5 a field or value.
    func visitArray(depth: Int, index: Int, count: Int) {
        switch depth {
        case 2 where index == 1: entries.reserveCapacity(count)
        case 3: id = nil
        case 4 where index == 1:
            fields = StreamEntryFields()
            fields.reserve(items: count, bytes: expectedEntryBytes)
            (fieldsExpected, fieldsSeen) = (count, 0)
            if count == 0 { finishEntry() }
        default: break
        }
    }

    func visitBulk(depth: Int, index: Int, bytes: UnsafeRawBufferPointer) {
        switch depth {
        case 4 where index == 0: id = String(decoding: bytes, as: UTF8.self)
        case 5:
            fields.append(bytes)
            fieldVisited()
        default: break
        }
    }

    // Stream fields are always bulk strings; anything else is passed over.
    func visitInteger(depth: Int, index: Int, value: Int64) { if depth == 5 { fieldVisited() } }
    func visitNull(depth: Int, index: Int) { if depth == 5 { fieldVisited() } }
    func visitStatus(depth: Int, index: Int, text: UnsafeRawBufferPointer) { if depth == 5 { fieldVisited() } }

    private func fieldVisited() {
        fieldsSeen += 1
        if fieldsSeen == fieldsExpected { finishEntry() }
    }

    private func finishEntry() {
        guard let id else { return }
        expectedEntryBytes = max(256, fields.bytes.count + fields.bytes.count / 4)
        entries.append(StreamEntry(id: id, fields: fields, deliveryCount: deliveryCount))
        self.id = nil
    }
}
