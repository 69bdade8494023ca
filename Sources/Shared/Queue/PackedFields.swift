/// Several byte strings packed into one (binary safe), each preceded by its length
/// as a LEB128 varint: the compact queue entry's `s` and `m` fields
/// (`QueueMessage`). Cheap to build and to read: one buffer, no escaping, no
/// parsing beyond the lengths. An optional item is written with its length plus
/// one, `0` meaning absent, so an empty value and no value stay distinct.
public struct PackedFields: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 64) {
        bytes.reserveCapacity(capacity)
    }

    public mutating func append(_ item: some Collection<UInt8>) {
        appendLength(item.count)
        bytes.append(contentsOf: item)
    }

    public mutating func append(_ text: String) {
        append(text.utf8)
    }

    public mutating func append(_ value: Int64) {
        append(String(value).utf8)
    }

    public mutating func appendOptional(_ text: String?) {
        guard let text else { return appendLength(0) }
        appendLength(text.utf8.count + 1)
        bytes.append(contentsOf: text.utf8)
    }

    private mutating func appendLength(_ length: Int) {
        var rest = UInt(length)
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    /// Reads the items of a packed value in the order they were written. Items are
    /// slices of `bytes`, indexed as it is (an array slice, or a slice of a buffer
    /// pointer to read without reference counting).
    public struct Reader<Bytes: Collection<UInt8>> where Bytes.Index == Int, Bytes.SubSequence == Bytes {
        private let bytes: Bytes
        private var position: Int

        public init(_ bytes: Bytes) {
            self.bytes = bytes
            position = bytes.startIndex
        }

        /// Everything has been read.
        public var isAtEnd: Bool { position == bytes.endIndex }

        /// The next item; fails if the value ends early.
        public mutating func next() -> Bytes? {
            guard let length = readLength() else { return nil }
            return take(length)
        }

        /// The next optional item: `.some(nil)` when written absent, nil if the value ends early.
        public mutating func nextOptional() -> Bytes?? {
            guard let length = readLength() else { return nil }
            if length == 0 { return .some(nil) }
            guard let item = take(length - 1) else { return nil }
            return .some(item)
        }

        private mutating func take(_ length: Int) -> Bytes? {
            guard length <= bytes.endIndex - position else { return nil }
            defer { position += length }
            return bytes[position..<(position + length)]
        }

        private mutating func readLength() -> Int? {
            var length = 0
            var shift = 0
            while position < bytes.endIndex, shift < 35 {
                let byte = bytes[position]
                position += 1
                length |= Int(byte & 0x7f) << shift
                if byte < 0x80 { return length }
                shift += 7
            }
            return nil
        }
    }
}
