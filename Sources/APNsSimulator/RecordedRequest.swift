import Shared

/// What is kept of an accepted request's fields and payload: every header field
/// but `authorization`, in arrival order, and the payload, packed into one
/// buffer. A request is recorded per notification and read rarely, so recording
/// costs one allocation and a copy, and the ring drops an old recording with one
/// free instead of a header list's strings; Strings are built when read.
///
/// Layout: each field as its name's and value's byte counts (4 bytes each) and
/// their bytes, then the payload.
struct RecordedRequest: Sendable {
    private let bytes: [UInt8]
    private let payloadStart: Int

    init(headers: [HTTP2Header], payload: [UInt8]) {
        var size = payload.count
        for header in headers where !Self.isAuthorization(header.name) {
            size += 8 + header.name.utf8.count + header.value.utf8.count
        }
        var position = 0
        bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            func put(_ source: UnsafeBufferPointer<UInt8>) {
                guard !source.isEmpty else { return }
                UnsafeMutableRawPointer(buffer.baseAddress! + position).copyMemory(
                    from: source.baseAddress!, byteCount: source.count)
                position += source.count
            }
            func putCount(of text: String) {
                withUnsafeBytes(of: UInt32(text.utf8.count)) { put($0.assumingMemoryBound(to: UInt8.self)) }
            }
            for header in headers where !Self.isAuthorization(header.name) {
                putCount(of: header.name)
                putCount(of: header.value)
                UTF8Bytes.with(header.name) { put($0) }
                UTF8Bytes.with(header.value) { put($0) }
            }
            payload.withUnsafeBufferPointer { put($0) }
            count = position
        }
        payloadStart = size - payload.count
    }

    private static func isAuthorization(_ name: String) -> Bool {
        UTF8Bytes.with(name) { UTF8Bytes.equal($0, "authorization") }
    }

    var payload: [UInt8] { Array(bytes[payloadStart...]) }

    /// Every header but `authorization`, in arrival order.
    var headers: [HTTP2Header] {
        var headers: [HTTP2Header] = []
        forEachField { name, value in
            headers.append(HTTP2Header(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
        return headers
    }

    /// The value of the first field named `name`, or nil.
    func value(of name: StaticString) -> String? {
        var found: String?
        forEachField { field, value in
            if found == nil && UTF8Bytes.equal(field, name) { found = String(decoding: value, as: UTF8.self) }
        }
        return found
    }

    private func forEachField(_ body: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void) {
        bytes.withUnsafeBufferPointer { buffer in
            var position = 0
            func take(_ count: Int) -> UnsafeBufferPointer<UInt8> {
                defer { position += count }
                return UnsafeBufferPointer(rebasing: buffer[position..<position + count])
            }
            func length() -> Int { Int(UnsafeRawBufferPointer(take(4)).loadUnaligned(as: UInt32.self)) }
            while position < payloadStart {
                let nameCount = length()
                let valueCount = length()
                body(take(nameCount), take(valueCount))
            }
        }
    }
}
