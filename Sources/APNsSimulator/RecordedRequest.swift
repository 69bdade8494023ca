import Shared

/// What is kept of an accepted request: every header field but `authorization`,
/// in arrival order, and the payload, packed into one run of bytes (in a
/// `RecordingRing` chunk, or copied out of it when read). Strings are built only
/// when read.
///
/// Layout: each field as its name's and value's byte counts (4 bytes each,
/// unaligned) and their bytes, then the payload.
struct RecordedRequest: Sendable {
    private let bytes: [UInt8]
    private let payloadStart: Int

    init(headers: [HTTP2Header], payload: [UInt8]) {
        let size = Self.packedSize(headers: headers, payload: payload)
        var payloadStart = 0
        bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            payloadStart = Self.pack(headers: headers, payload: payload, into: UnsafeMutableRawBufferPointer(buffer))
            count = size
        }
        self.payloadStart = payloadStart
    }

    /// A copy of packed bytes.
    init(copying packed: Packed) {
        bytes = Array(packed.bytes)
        payloadStart = packed.payloadStart
    }

    var payload: [UInt8] { withPacked { $0.payload } }
    /// Every header but `authorization`, in arrival order.
    var headers: [HTTP2Header] { withPacked { $0.headers } }
    /// The value of the first field named `name`, or nil.
    func value(of name: StaticString) -> String? { withPacked { $0.value(of: name) } }

    private func withPacked<Result>(_ body: (Packed) -> Result) -> Result {
        bytes.withUnsafeBytes { body(Packed(bytes: $0, payloadStart: payloadStart)) }
    }

    // MARK: Packing

    /// The bytes `pack` writes.
    static func packedSize(headers: [HTTP2Header], payload: [UInt8]) -> Int {
        // Fields read in place: iterating the array would copy (retain) each one.
        headers.withUnsafeBufferPointer { headers in
            var size = payload.count
            for index in headers.indices where !isAuthorization(headers[index].name) {
                size += 8 + headers[index].name.utf8.count + headers[index].value.utf8.count
            }
            return size
        }
    }

    /// Writes `headers` (but `authorization`) and `payload` into `buffer`, which
    /// holds `packedSize` bytes; returns where the payload starts.
    static func pack(headers: [HTTP2Header], payload: [UInt8], into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var position = 0
        func put(_ source: UnsafeBufferPointer<UInt8>) {
            guard let base = source.baseAddress, !source.isEmpty else { return }
            (buffer.baseAddress! + position).copyMemory(from: base, byteCount: source.count)
            position += source.count
        }
        func putCount(of text: String) {
            buffer.storeBytes(of: UInt32(text.utf8.count), toByteOffset: position, as: UInt32.self)
            position += 4
        }
        headers.withUnsafeBufferPointer { headers in
            for index in headers.indices where !isAuthorization(headers[index].name) {
                putCount(of: headers[index].name)
                putCount(of: headers[index].value)
                UTF8Bytes.with(headers[index].name) { put($0) }
                UTF8Bytes.with(headers[index].value) { put($0) }
            }
        }
        let payloadStart = position
        payload.withUnsafeBufferPointer { put($0) }
        return payloadStart
    }

    private static func isAuthorization(_ name: String) -> Bool {
        UTF8Bytes.with(name) { UTF8Bytes.equal($0, "authorization") }
    }

    /// Packed bytes, read in place.
    struct Packed {
        let bytes: UnsafeRawBufferPointer
        let payloadStart: Int

        var payload: [UInt8] { Array(bytes[payloadStart...]) }

        var headers: [HTTP2Header] {
            var headers: [HTTP2Header] = []
            forEachField { name, value in
                headers.append(
                    HTTP2Header(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
            }
            return headers
        }

        func value(of name: StaticString) -> String? {
            var found: String?
            forEachField { field, value in
                if found == nil && UTF8Bytes.equal(field, name) { found = String(decoding: value, as: UTF8.self) }
            }
            return found
        }

        private func forEachField(_ body: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void) {
            var position = 0
            func take(_ count: Int) -> UnsafeBufferPointer<UInt8> {
                defer { position += count }
                // Bound to UInt8: an array's bytes, or a ring chunk allocated as UInt8.
                return UnsafeRawBufferPointer(rebasing: bytes[position..<position + count])
                    .assumingMemoryBound(to: UInt8.self)
            }
            func count() -> Int {
                defer { position += 4 }
                return Int(bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self))
            }
            while position < payloadStart {
                let nameCount = count()
                let valueCount = count()
                body(take(nameCount), take(valueCount))
            }
        }
    }
}
