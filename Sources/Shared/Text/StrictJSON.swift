import Foundation

/// A strict RFC 8259 check of JSON text in UTF-8, without building it: one pass over
/// the bytes. It refuses what Foundation's parsers let through: a trailing comma, a
/// byte-order mark or another encoding than UTF-8, invalid UTF-8 anywhere (also in
/// a member the decoder would skip), a leading zero, nesting past 64 levels, and on
/// request a member name given twice in one object (RFC 8259 §4: the meaning is
/// then unpredictable; Foundation keeps the first, most parsers the last).
///
/// UTF-8 is checked where it can occur: a byte of 0x80 or more is well-formed
/// JSON only inside a string, so validating the strings' sequences validates the
/// whole text. String contents are skipped eight bytes at a time.
public enum StrictJSON {
    /// What the text is, as far as `check` looks.
    public enum Verdict: Equatable, Sendable {
        /// Not JSON (or a repeated member name, when refused).
        case malformed
        /// JSON whose top level is not an object.
        case notAnObject
        /// A top-level object; `hasObjectMember`: whether its member named as asked
        /// (`objectMember`) is itself an object.
        case object(hasObjectMember: Bool)
    }

    /// Whether `bytes` is one well-formed JSON text whose objects name no member twice.
    public static func isWellFormed(_ bytes: [UInt8]) -> Bool {
        check(bytes, uniqueMembers: true) != .malformed
    }

    /// Checks `bytes`; with `objectMember`, notes whether the top-level object has a
    /// member of that name whose value is an object (the APNs simulator's `aps`).
    public static func check(_ bytes: [UInt8], uniqueMembers: Bool, objectMember: StaticString? = nil) -> Verdict {
        bytes.withUnsafeBufferPointer { check($0, uniqueMembers: uniqueMembers, objectMember: objectMember) }
    }

    public static func check(
        _ bytes: UnsafeBufferPointer<UInt8>, uniqueMembers: Bool, objectMember: StaticString? = nil
    ) -> Verdict {
        var parser = Parser(bytes: bytes, uniqueMembers: uniqueMembers, objectMember: objectMember)
        parser.skipWhitespace()
        let isObject = parser.peek == UInt8(ascii: "{")
        guard parser.parseValue(depth: 0), parser.atEndAfterWhitespace else { return .malformed }
        return isObject ? .object(hasObjectMember: parser.sawObjectMember) : .notAnObject
    }

    /// Well-formed UTF-8 (Unicode Table 3-7: no overlong forms, surrogates or code
    /// points past U+10FFFF), as `String(validating:)` decides it but without
    /// copying the bytes into a string.
    public static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
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
        let uniqueMembers: Bool
        let objectMember: StaticString?
        var index = 0
        /// Set when the top-level object has `objectMember` with an object value.
        var sawObjectMember = false
        static let maximumDepth = 64

        init(bytes: UnsafeBufferPointer<UInt8>, uniqueMembers: Bool, objectMember: StaticString?) {
            self.bytes = bytes
            self.uniqueMembers = uniqueMembers
            self.objectMember = objectMember
        }

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
            // The member names seen, when repeats are refused: decoded, and compared as
            // Swift strings compare them (canonically: "é" and "e\u0301" are one name to
            // a decoder), in a set (an object of thousands of names costs no more than
            // thousands of lookups).
            var names = Set<String>()
            while true {
                skipWhitespace()
                guard peek == UInt8(ascii: "\""), let key = parseString() else { return false }
                if uniqueMembers {
                    guard let name = Self.decodedName(key), names.insert(name).inserted else { return false }
                }
                skipWhitespace()
                guard peek == UInt8(ascii: ":") else { return false }
                index += 1
                skipWhitespace()
                if depth == 0, let objectMember, peek == UInt8(ascii: "{"), key.count == objectMember.utf8CodeUnitCount,
                    key.elementsEqual(UnsafeBufferPointer(start: objectMember.utf8Start, count: key.count))
                {
                    sawObjectMember = true
                }
                guard parseValue(depth: depth + 1), let ended = separatorOrEnd(UInt8(ascii: "}")) else { return false }
                if ended { return true }
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
                guard parseValue(depth: depth + 1), let ended = separatorOrEnd(UInt8(ascii: "]")) else { return false }
                if ended { return true }
            }
        }

        /// After a member or an element: a `,` (taken) means more follow (false), `close`
        /// (taken) ends the container (true), anything else is malformed (nil).
        mutating func separatorOrEnd(_ close: UInt8) -> Bool? {
            skipWhitespace()
            switch peek {
            case UInt8(ascii: ","):
                index += 1
                return false
            case close:
                index += 1
                return true
            default:
                return nil
            }
        }

        /// A member name (its raw bytes, already checked as a JSON string) as text, its
        /// escapes decoded (`"\u0061"` is `"a"`); nil for a `\u` escape of a lone
        /// surrogate, which stands for no character (and a decoder refuses).
        static func decodedName(_ raw: UnsafeBufferPointer<UInt8>.SubSequence) -> String? {
            guard raw.contains(UInt8(ascii: "\\")) else { return String(decoding: raw, as: UTF8.self) }
            var scalars = String.UnicodeScalarView()
            var bytes = raw.makeIterator()
            var plain: [UInt8] = []
            func flush() {
                scalars.append(contentsOf: String(decoding: plain, as: UTF8.self).unicodeScalars)
                plain.removeAll(keepingCapacity: true)
            }
            func hex4() -> UInt32? {
                var value: UInt32 = 0
                for _ in 0..<4 {
                    guard let byte = bytes.next(), let digit = Self.hexValue(byte) else { return nil }
                    value = value << 4 | digit
                }
                return value
            }
            while let byte = bytes.next() {
                guard byte == UInt8(ascii: "\\") else {
                    plain.append(byte)
                    continue
                }
                flush()
                guard let escaped = bytes.next() else { return nil }
                switch escaped {
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    guard var code = hex4() else { return nil }
                    if (0xD800...0xDBFF).contains(code) {
                        // A high surrogate must be followed by an escaped low one.
                        guard bytes.next() == UInt8(ascii: "\\"), bytes.next() == UInt8(ascii: "u"), let low = hex4(),
                            (0xDC00...0xDFFF).contains(low)
                        else { return nil }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { return nil }  // a lone low surrogate
                    scalars.append(scalar)
                default: scalars.append(Unicode.Scalar(escaped))  // " \ /
                }
            }
            flush()
            return String(scalars)
        }

        static func hexValue(_ byte: UInt8) -> UInt32? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
            default: nil
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
                    guard let length = StrictJSON.sequenceLength(in: bytes, at: index) else { return nil }
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
                if StrictJSON.hasStringSpecialByte(word) { break }
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

        func isHexDigit(_ byte: UInt8) -> Bool { Self.hexValue(byte) != nil }
    }
}
