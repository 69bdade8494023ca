import Foundation
import Shared

/// Checks of identifiers and names that arrive in paths and bodies.
enum AdminValidation {
    /// Account, app and user ids chosen by the caller: 1…128 of `A-Z a-z 0-9 . _ : @ -`,
    /// starting with a letter or digit.
    static func id(_ value: String, _ what: String) throws(AdminError) -> String {
        let bytes = Array(value.utf8)
        guard (1...128).contains(bytes.count), isAlphanumeric(bytes[0]),
            bytes.allSatisfy({
                isAlphanumeric($0)
                    || [UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "-")]
                        .contains($0)
            })
        else {
            throw .invalid("\(what) must be 1 to 128 letters, digits or . _ : @ - (starting with a letter or digit)")
        }
        return value
    }

    /// A new id: `prefix` and 20 hex digits.
    static func newID(_ prefix: String) -> String {
        prefix + SecureRandom.bytes(10).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }

    /// Display names: at most 200 characters, no control characters.
    static func name(_ value: String?) throws(AdminError) -> String {
        let value = value ?? ""
        guard value.count <= 200, !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .invalid("name must be at most 200 characters without control characters")
        }
        return value
    }

    /// Apple's Team ID and Key ID: 10 characters, A-Z and 0-9.
    static func appleID(_ value: String, _ what: String) throws(AdminError) -> String {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count == 10, trimmed.utf8.allSatisfy({ isUppercaseAlphanumeric($0) }) else {
            throw .invalid("\(what) must be Apple's 10-character id (A-Z, 0-9)")
        }
        return trimmed
    }

    /// An iOS bundle id as the schema accepts it.
    static func isBundleID(_ value: String) -> Bool {
        let bytes = Array(value.utf8)
        guard (1...155).contains(bytes.count), isAlphanumeric(bytes[0]) else { return false }
        return bytes.allSatisfy { isAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
    }

    /// Free text such as a ban reason: at most 500 characters, no control characters
    /// but tabs and line breaks. A blank one is no reason: null, as when absent.
    static func reason(_ value: String?) throws(AdminError) -> String? {
        guard let value, !value.allSatisfy(\.isWhitespace) else { return nil }
        guard value.count <= 500 else { throw .invalid("reason must be at most 500 characters") }
        guard
            !value.unicodeScalars.contains(where: {
                ($0.value < 0x20 && $0 != "\t" && $0 != "\n" && $0 != "\r") || $0.value == 0x7F
            })
        else { throw .invalid("reason must not contain control characters") }
        return value
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }

    private static func isUppercaseAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
