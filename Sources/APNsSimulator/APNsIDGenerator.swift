/// Makes the `apns-id`s the simulator answers with when a request brings none:
/// random (version 4) UUIDs. A connection keeps one, seeded from the system's
/// generator, so a response costs no system call and no `Foundation.UUID`.
struct APNsIDGenerator {
    /// SplitMix64: fast, and uniform enough for ids that only need to be distinct.
    private var state: UInt64

    init(seed: UInt64 = UInt64.random(in: .min ... .max)) {
        state = seed
    }

    private mutating func next64() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A new id, kept as its bits until it is written out.
    mutating func next() -> APNsID {
        .generated(
            high: next64() & 0xFFFF_FFFF_FFFF_0FFF | 0x0000_0000_0000_4000,  // version 4
            low: next64() & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000)  // RFC 4122 variant
    }
}

/// The `apns-id` of a response (and of a recorded notification): the request's
/// own, as it sent it, or one the simulator made. A made one stays 128 bits until
/// it is written: into the response's header bytes, or as a String only when the
/// control API or a test asks.
enum APNsID: Sendable, Equatable, CustomStringConvertible {
    case requested(String)
    /// Written `XXXXXXXX-XXXX-4XXX-YXXX-XXXXXXXXXXXX` (upper case, as Apple does).
    case generated(high: UInt64, low: UInt64)

    var description: String {
        switch self {
        case .requested(let text): text
        case .generated(let high, let low):
            String(unsafeUninitializedCapacity: 36) { Self.writeCanonical(high: high, low: low, into: $0) }
        }
    }

    /// Appends the id's text to `bytes`.
    func write(to bytes: inout [UInt8]) {
        switch self {
        case .requested(let text): bytes.append(contentsOf: text.utf8)
        case .generated(let high, let low):
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 36) { buffer in
                let count = Self.writeCanonical(high: high, low: low, into: buffer)
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[..<count]))
            }
        }
    }

    /// Writes the 36 characters into `buffer`; returns 36.
    private static func writeCanonical(high: UInt64, low: UInt64, into buffer: UnsafeMutableBufferPointer<UInt8>)
        -> Int
    {
        var position = 0
        func put(_ value: UInt64, nibbles: Int) {
            for shift in stride(from: (nibbles - 1) * 4, through: 0, by: -4) {
                let nibble = UInt8(truncatingIfNeeded: value >> UInt64(shift)) & 0xF
                buffer[position] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") - 10 + nibble
                position += 1
            }
        }
        func dash() {
            buffer[position] = UInt8(ascii: "-")
            position += 1
        }
        put(high >> 32, nibbles: 8)
        dash()
        put(high >> 16, nibbles: 4)
        dash()
        put(high, nibbles: 4)
        dash()
        put(low >> 48, nibbles: 4)
        dash()
        put(low, nibbles: 12)
        return position
    }
}
