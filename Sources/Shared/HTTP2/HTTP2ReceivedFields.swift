import Foundation

/// The header fields received on one stream, kept as the bytes nghttp2 handed
/// over: one buffer for all names and values, so receiving a field builds no
/// String and, once a stream's state is reused, allocates nothing.
public struct HTTP2ReceivedFields {
    private var bytes: [UInt8] = []
    private var fields: [(name: Range<Int>, value: Range<Int>)] = []

    public init() {}

    public init(_ headers: [HTTP2Header]) {
        for header in headers {
            var name = header.name
            var value = header.value
            name.withUTF8 { name in value.withUTF8 { value in append(name: name, value: value) } }
        }
    }

    public var count: Int { fields.count }

    /// Adds a field (names as received: lower-case in HTTP/2).
    mutating func append(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name)
        let valueStart = bytes.count
        bytes.append(contentsOf: value)
        fields.append((nameStart..<valueStart, valueStart..<bytes.count))
    }

    /// Empties it, keeping its memory for the next stream.
    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        fields.removeAll(keepingCapacity: true)
    }

    /// Calls `body` with the value of the first field named `name` (valid only
    /// during the call); nil when there is no such field.
    public func withValue<Result>(of name: StaticString, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result? {
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return nil }
            // Lengths, then memcmp: every answer is read this way, a field or two per name.
            for field in fields
            where field.name.count == name.utf8CodeUnitCount
                && memcmp(base + field.name.lowerBound, name.utf8Start, field.name.count) == 0
            {
                return body(UnsafeBufferPointer(rebasing: buffer[field.value]))
            }
            return nil
        }
    }

    /// The value of the first field named `name`, as a String.
    public subscript(_ name: StaticString) -> String? {
        withValue(of: name) { String(decoding: $0, as: UTF8.self) }
    }

    /// The fields as `HTTP2Header`s, in order.
    public var headers: [HTTP2Header] {
        fields.map { field in
            HTTP2Header(
                String(decoding: bytes[field.name], as: UTF8.self), String(decoding: bytes[field.value], as: UTF8.self))
        }
    }
}
