/// Base64 with the URL- and filename-safe alphabet (RFC 4648 §5), without padding,
/// as JWT, Web Push keys and our ids use it.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Maps an ASCII byte to its 6-bit value, or 0xFF for a byte outside the alphabet.
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = UInt8(index) }
        return table
    }()

    /// The two characters of every 12-bit value, the first in the low byte: three
    /// input bytes become two lookups and two 2-byte stores instead of four and four
    /// (the worker encodes every notification's ciphertext).
    private static let pairs: [UInt16] = (0..<4096).map {
        UInt16(alphabet[$0 >> 6]) | UInt16(alphabet[$0 & 0x3F]) << 8
    }

    /// The unpadded base64url text of `bytes`.
    public static func encode(_ bytes: [UInt8]) -> String {
        encode(bytes[...])
    }

    /// The unpadded base64url text of `bytes`, written straight into the string's own
    /// storage (no intermediate array: an id per accepted push).
    public static func encode(_ bytes: ArraySlice<UInt8>) -> String {
        let length = encodedLength(bytes.count)
        return String(unsafeUninitializedCapacity: length) { output in
            bytes.withUnsafeBufferPointer { write($0, to: UnsafeMutableRawBufferPointer(output), at: 0) }
            return length
        }
    }

    /// The unpadded base64url length of `count` bytes.
    public static func encodedLength(_ count: Int) -> Int { (count * 4 + 2) / 3 }

    /// Appends the unpadded base64url text of `input` to `bytes` (e.g. straight into a
    /// payload being built).
    public static func append(_ input: [UInt8], to bytes: inout [UInt8]) {
        append(input[...], to: &bytes)
    }

    /// `append` of bytes in place in a larger buffer (a queue entry's ciphertext).
    public static func append(_ input: ArraySlice<UInt8>, to bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: encodedLength(input.count)))
        input.withUnsafeBufferPointer { source in
            bytes.withUnsafeMutableBytes { write(source, to: $0, at: start) }
        }
    }

    /// Writes the text of `source` into `output` from `start` (room for
    /// `encodedLength(source.count)` bytes there).
    private static func write(
        _ source: UnsafeBufferPointer<UInt8>, to output: UnsafeMutableRawBufferPointer, at start: Int
    ) {
        pairs.withUnsafeBufferPointer { pairs in
            alphabet.withUnsafeBufferPointer { table in
                var index = 0
                var out = start
                let count = source.count
                while index + 3 <= count {
                    let group = Int(source[index]) << 16 | Int(source[index + 1]) << 8 | Int(source[index + 2])
                    output.storeBytes(of: pairs[group >> 12].littleEndian, toByteOffset: out, as: UInt16.self)
                    output.storeBytes(of: pairs[group & 0xFFF].littleEndian, toByteOffset: out + 2, as: UInt16.self)
                    index += 3
                    out += 4
                }
                if count - index == 1 {
                    let group = Int(source[index]) << 16
                    output[out] = table[group >> 18 & 0x3F]
                    output[out + 1] = table[group >> 12 & 0x3F]
                } else if count - index == 2 {
                    let group = Int(source[index]) << 16 | Int(source[index + 1]) << 8
                    output[out] = table[group >> 18 & 0x3F]
                    output[out + 1] = table[group >> 12 & 0x3F]
                    output[out + 2] = table[group >> 6 & 0x3F]
                }
            }
        }
    }

    /// The bytes of unpadded base64url `text`, or nil if it is not canonical
    /// base64url: a character outside `A–Z a–z 0–9 - _` (including `=`, `+`, `/` and
    /// whitespace), a length that no byte count encodes to (4n + 1), or non-zero
    /// unused bits in the last character (so each byte string has one encoding).
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let input = Array(text.utf8)
        guard input.count % 4 != 1 else { return nil }
        var output = [UInt8]()
        output.reserveCapacity(input.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for character in input {
            let value = values[Int(character)]
            guard value != 0xFF else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // 2 or 4 bits are left over after a partial group; they must be zero.
        guard accumulator == 0 else { return nil }
        return output
    }
}
