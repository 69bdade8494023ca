import Glibc

/// Byte checks on UTF-8: request fields are judged as the bytes received, and
/// strings are read from their contiguous storage (a generic walk of
/// `String.UTF8View` costs more per request than the checks themselves).
enum UTF8Bytes {
    static func with<Result>(_ string: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        var string = string
        return string.withUTF8(body)
    }

    static func equal(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        guard let first = a.baseAddress, let second = b.baseAddress else { return true }
        return memcmp(first, second, a.count) == 0
    }

    // StaticStrings through `withUTF8Buffer`: a one-character literal is stored as
    // a scalar, with no `utf8Start`.

    static func equal(_ bytes: UnsafeBufferPointer<UInt8>, _ text: StaticString) -> Bool {
        text.withUTF8Buffer { equal(bytes, $0) }
    }

    static func equal(_ a: StaticString, _ b: StaticString) -> Bool {
        a.withUTF8Buffer { equal($0, b) }
    }

    static func hasPrefix(_ bytes: UnsafeBufferPointer<UInt8>, _ prefix: StaticString) -> Bool {
        prefix.withUTF8Buffer { prefix in
            bytes.count >= prefix.count && equal(UnsafeBufferPointer(rebasing: bytes.prefix(prefix.count)), prefix)
        }
    }

    static func hasSuffix(_ bytes: UnsafeBufferPointer<UInt8>, _ suffix: StaticString) -> Bool {
        suffix.withUTF8Buffer { suffix in
            bytes.count >= suffix.count && equal(UnsafeBufferPointer(rebasing: bytes.suffix(suffix.count)), suffix)
        }
    }
}
