import Glibc

/// Byte checks on a string's UTF-8, read from its contiguous storage: a generic
/// walk of `String.UTF8View` (or of a `Substring` of it) costs more per request
/// than the checks themselves. Header values arrive as native strings, so
/// `withUTF8` copies nothing.
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

    /// Whether every byte of `string` passes `test`.
    static func all(_ string: String, _ test: (UInt8) -> Bool) -> Bool {
        with(string) { $0.allSatisfy(test) }
    }

    /// Whether some byte of `string` passes `test`.
    static func any(_ string: String, _ test: (UInt8) -> Bool) -> Bool {
        with(string) { $0.contains(where: test) }
    }
}
