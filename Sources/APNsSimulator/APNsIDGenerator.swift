/// Makes the `apns-id`s the simulator answers with when a request brings none:
/// random (version 4) UUIDs in Apple's upper-case canonical form. A connection
/// keeps one, seeded from the system's generator, so a response costs no system
/// call and no `Foundation.UUID` formatting (which opens and formats per call here).
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

    private static let hex = Array("0123456789ABCDEF".utf8)

    /// `XXXXXXXX-XXXX-4XXX-YXXX-XXXXXXXXXXXX` (Y is 8, 9, A or B).
    mutating func next() -> String {
        let high = next64() & 0xFFFF_FFFF_FFFF_0FFF | 0x0000_0000_0000_4000  // version 4
        let low = next64() & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000  // RFC 4122 variant
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            func put(_ value: UInt64, nibbles: Int) {
                for shift in stride(from: (nibbles - 1) * 4, through: 0, by: -4) {
                    buffer[position] = Self.hex[Int(value >> UInt64(shift) & 0xF)]
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
}
