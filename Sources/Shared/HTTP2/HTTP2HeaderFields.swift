import CNGHTTP2

/// The header fields of one outgoing request or response, collected without an
/// allocation per field: values (and names that are not constants) are copied
/// into one byte buffer, constant names stay where they are and nghttp2 does
/// not copy them either. A connection reuses one for request after request.
public struct HTTP2HeaderFields {
    private enum Name {
        case constant(StaticString)
        case bytes(Range<Int>)
    }

    private var bytes: [UInt8] = []
    /// `indexed`: whether HPACK may add the field to its dynamic table. A value that
    /// never repeats (a response's `apns-id`) only churns both ends' tables.
    private var fields: [(name: Name, value: Range<Int>, indexed: Bool)] = []

    public init() {}

    /// Empty, with room for `count` fields of `bytes` bytes in all.
    public init(reservingCapacity count: Int, bytes: Int) {
        fields.reserveCapacity(count)
        self.bytes.reserveCapacity(bytes)
    }

    public init(_ headers: [HTTP2Header]) {
        for header in headers { append(header) }
    }

    public var count: Int { fields.count }

    /// Empties it, keeping its memory for the next request.
    public mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        fields.removeAll(keepingCapacity: true)
    }

    /// Adds `name: value`; `name` must be lower-case.
    public mutating func append(_ name: StaticString, _ value: String) {
        append(name) { Self.appendUTF8(of: value, to: &$0) }
    }

    /// Adds `name: prefix + value` (`authorization: bearer …`, `:path: /3/device/…`).
    public mutating func append(_ name: StaticString, prefix: StaticString, _ value: String) {
        append(name) { bytes in
            bytes.append(contentsOf: UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
            Self.appendUTF8(of: value, to: &bytes)
        }
    }

    /// Adds `name: prefix + value` for a value given as bytes (a span of a larger buffer).
    public mutating func append(_ name: StaticString, prefix: StaticString, bytes value: ArraySlice<UInt8>) {
        append(name) { bytes in
            bytes.append(contentsOf: UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
            bytes.append(contentsOf: value)
        }
    }

    /// Appends `value`'s UTF-8 in one copy from its storage (appending `utf8` as a
    /// sequence takes a slower, generic path).
    private static func appendUTF8(of value: String, to bytes: inout [UInt8]) {
        let copied: Void? = value.utf8.withContiguousStorageIfAvailable { bytes.append(contentsOf: $0) }
        if copied == nil { bytes.append(contentsOf: value.utf8) }
    }

    /// Adds `name` with the value `writeValue` appends to the buffer.
    public mutating func append(_ name: StaticString, writingValue writeValue: (inout [UInt8]) -> Void) {
        let start = bytes.count
        writeValue(&bytes)
        fields.append((.constant(name), start..<bytes.count, true))
    }

    /// Adds `name` with the value `writeValue` appends, sent as a literal HPACK never
    /// adds to its tables: for values unique to one message.
    public mutating func appendUnindexed(_ name: StaticString, writingValue writeValue: (inout [UInt8]) -> Void) {
        let start = bytes.count
        writeValue(&bytes)
        fields.append((.constant(name), start..<bytes.count, false))
    }

    /// Adds a field whose name is not a constant.
    public mutating func append(_ header: HTTP2Header) {
        let nameStart = bytes.count
        bytes.append(contentsOf: header.name.utf8)
        let valueStart = bytes.count
        bytes.append(contentsOf: header.value.utf8)
        fields.append((.bytes(nameStart..<valueStart), valueStart..<bytes.count, true))
    }

    /// The fields as `HTTP2Header`s, in order (for tests and diagnostics).
    public var headers: [HTTP2Header] {
        fields.map { field in
            let name =
                switch field.name {
                case .constant(let name): name.description
                case .bytes(let range): String(decoding: bytes[range], as: UTF8.self)
                }
            return HTTP2Header(name, String(decoding: bytes[field.value], as: UTF8.self))
        }
    }

    /// Calls `body` with nghttp2 name/value pairs pointing into these fields, valid
    /// only during the call (nghttp2 copies what it keeps, constant names aside).
    func withNameValues<Result>(_ body: (UnsafeMutableBufferPointer<nghttp2_nv>) -> Result) -> Result {
        withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: fields.count) { nva in
            bytes.withUnsafeBufferPointer { buffer in
                // Every value may be empty, and the buffer too: nghttp2 still gets a valid pointer.
                let empty: StaticString = ""
                let base = UnsafeMutablePointer(mutating: buffer.baseAddress ?? empty.utf8Start)
                let noIndex = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)
                for (index, field) in fields.enumerated() {
                    let value = base + field.value.lowerBound
                    let indexing = field.indexed ? 0 : noIndex
                    switch field.name {
                    case .constant(let name):
                        nva.initializeElement(
                            at: index,
                            to: nghttp2_nv(
                                name: UnsafeMutablePointer(mutating: name.utf8Start), value: value,
                                namelen: name.utf8CodeUnitCount, valuelen: field.value.count,
                                flags: UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue) | indexing))
                    case .bytes(let name):
                        nva.initializeElement(
                            at: index,
                            to: nghttp2_nv(
                                name: base + name.lowerBound, value: value, namelen: name.count,
                                valuelen: field.value.count, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue) | indexing))
                    }
                }
                return body(nva)
            }
        }
    }
}
