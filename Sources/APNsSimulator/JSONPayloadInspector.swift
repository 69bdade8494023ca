/// Checks a notification payload without building it: well-formed JSON
/// (RFC 8259, UTF-8) whose top level is an object with an `aps` member that is
/// itself an object. A single pass over the bytes with no allocation, because it
/// runs for every request; `JSONSerialization` would cost several times more.
///
/// UTF-8 is checked where it can occur: a byte of 0x80 or more is well-formed
/// JSON only inside a string, so validating the strings' sequences validates the
/// whole payload. String contents (most of a payload: the encrypted message) are
/// skipped eight bytes at a time.
enum JSONPayloadInspector {
    enum Verdict: Equatable {
        case valid
        /// Not JSON, or JSON but not an object.
        case malformed
        /// A JSON object without an `aps` object.
        case missingAPS
    }

    static func inspect(_ bytes: [UInt8]) -> Verdict {
        bytes.withUnsafeBufferPointer { inspect($0) }
    }

    static func inspect(_ bytes: UnsafeBufferPointer<UInt8>) -> Verdict {
        var parser = Parser(bytes: bytes)
        parser.skipWhitespace()
        guard parser.peek == UInt8(ascii: "{") else { return .malformed }
        guard parser.parseValue(depth: 0), parser.atEndAfterWhitespace else { return .malformed }
        return parser.sawAPSObject ? .valid : .missingAPS
    }

    /// Well-formed UTF-8 (Unicode Table 3-7: no overlong forms, surrogates or code
    /// points past U+10FFFF), as `String(validating:)` decides it but without
    /// copying the bytes into a string.
    static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        while index < bytes.count {
            guard let length = sequenceLength(in: bytes, at: index) else { return false }
            index += length
        }
        return true
    }

    /// The length of the well-formed UTF-8 sequence starting at `index`, or nil.
    @inline(__always)
    static func sequenceLength(in bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> Int? {
        let lead = bytes[index]
        if lead < 0x80 { return 1 }
        // The allowed range of the second byte, and how many bytes follow the lead.
        let second: ClosedRange<UInt8>
        let trailing: Int
        switch lead {
        case 0xC2...0xDF: (second, trailing) = (0x80...0xBF, 1)
        case 0xE0: (second, trailing) = (0xA0...0xBF, 2)
        case 0xE1...0xEC, 0xEE...0xEF: (second, trailing) = (0x80...0xBF, 2)
        case 0xED: (second, trailing) = (0x80...0x9F, 2)
        case 0xF0: (second, trailing) = (0x90...0xBF, 3)
        case 0xF1...0xF3: (second, trailing) = (0x80...0xBF, 3)
        case 0xF4: (second, trailing) = (0x80...0x8F, 3)
        default: return nil
        }
        guard bytes.count - index > trailing, second.contains(bytes[index + 1]) else { return nil }
        for offset in stride(from: 2, through: trailing, by: 1) where bytes[index + offset] & 0xC0 != 0x80 {
            return nil
        }
        return trailing + 1
    }

    /// Whether one of the eight bytes of `word` ends a run of plain string content:
    /// a quote, a backslash, a control character (< 0x20) or a non-ASCII byte. The
    /// classic SWAR tests ("has a zero byte", "has a byte less than n"): exact for
    /// whether any byte matches, which is all that is asked.
    @inline(__always)
    static func hasStringSpecialByte(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        func hasZeroByte(_ value: UInt64) -> UInt64 { (value &- ones) & ~value & highs }
        let control = (word &- ones &* 0x20) & ~word & highs
        let quote = hasZeroByte(word ^ (ones &* UInt64(UInt8(ascii: "\""))))
        let backslash = hasZeroByte(word ^ (ones &* UInt64(UInt8(ascii: "\\"))))
        return (control | quote | backslash | (word & highs)) != 0
    }

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        /// Set when the top-level object has `"aps": {…}`.
        var sawAPSObject = false
        static let maximumDepth = 64

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        var atEndAfterWhitespace: Bool {
            mutating get {
                skipWhitespace()
                return index == bytes.count
            }
        }

        mutating func skipWhitespace() {
            while let byte = peek, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
        }

        mutating func parseValue(depth: Int) -> Bool {
            guard depth < Self.maximumDepth else { return false }
            skipWhitespace()
            guard let byte = peek else { return false }
            switch byte {
            case UInt8(ascii: "{"): return parseObject(depth: depth)
            case UInt8(ascii: "["): return parseArray(depth: depth)
            case UInt8(ascii: "\""): return parseString() != nil
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return parseNumber()
            }
        }

        mutating func parseObject(depth: Int) -> Bool {
            index += 1  // {
            skipWhitespace()
            if peek == UInt8(ascii: "}") {
                index += 1
                return true
            }
            while true {
                skipWhitespace()
                guard peek == UInt8(ascii: "\""), let key = parseString() else { return false }
                skipWhitespace()
                guard peek == UInt8(ascii: ":") else { return false }
                index += 1
                skipWhitespace()
                let isAPS = depth == 0 && key.count == 3 && key.elementsEqual("aps".utf8)
                if isAPS && peek == UInt8(ascii: "{") { sawAPSObject = true }
                guard parseValue(depth: depth + 1) else { return false }
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "}"):
                    index += 1
                    return true
                default: return false
                }
            }
        }

        mutating func parseArray(depth: Int) -> Bool {
            index += 1  // [
            skipWhitespace()
            if peek == UInt8(ascii: "]") {
                index += 1
                return true
            }
            while true {
                guard parseValue(depth: depth + 1) else { return false }
                skipWhitespace()
                switch peek {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "]"):
                    index += 1
                    return true
                default: return false
                }
            }
        }

        /// Parses a string starting at its quote; returns its raw (still escaped) bytes.
        mutating func parseString() -> UnsafeBufferPointer<UInt8>.SubSequence? {
            index += 1  // "
            let start = index
            while true {
                skipPlainStringBytes()
                guard let byte = peek else { return nil }
                switch byte {
                case UInt8(ascii: "\""):
                    let content = bytes[start..<index]
                    index += 1
                    return content
                case UInt8(ascii: "\\"):
                    index += 1
                    guard let escaped = peek else { return nil }
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                        UInt8(ascii: "f"),
                        UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        index += 1
                    case UInt8(ascii: "u"):
                        index += 1
                        for _ in 0..<4 {
                            guard let hex = peek, isHexDigit(hex) else { return nil }
                            index += 1
                        }
                    default: return nil
                    }
                case 0..<0x20: return nil
                case 0x80...:
                    guard let length = JSONPayloadInspector.sequenceLength(in: bytes, at: index) else { return nil }
                    index += length
                default: index += 1
                }
            }
        }

        /// Moves past string content that stands for itself (printable ASCII but
        /// `"` and `\`): eight bytes at a time, then byte by byte up to the first
        /// byte that needs a look.
        mutating func skipPlainStringBytes() {
            guard let base = bytes.baseAddress else { return }
            while bytes.count - index >= 8 {
                let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                if JSONPayloadInspector.hasStringSpecialByte(word) { break }
                index += 8
            }
            while index < bytes.count {
                let byte = base[index]
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { return }
                index += 1
            }
        }

        mutating func parseNumber() -> Bool {
            if peek == UInt8(ascii: "-") { index += 1 }
            guard let first = peek, isDigit(first) else { return false }
            index += 1
            if first != UInt8(ascii: "0") { skipDigits() }
            if peek == UInt8(ascii: ".") {
                index += 1
                guard let digit = peek, isDigit(digit) else { return false }
                skipDigits()
            }
            if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
                index += 1
                if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { index += 1 }
                guard let digit = peek, isDigit(digit) else { return false }
                skipDigits()
            }
            return true
        }

        mutating func skipDigits() {
            while let byte = peek, isDigit(byte) { index += 1 }
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

        func isHexDigit(_ byte: UInt8) -> Bool {
            isDigit(byte) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
        }
    }
}
