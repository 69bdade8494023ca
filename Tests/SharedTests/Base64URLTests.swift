import Foundation
import Testing

@testable import Shared

@Suite struct Base64URLTests {
    /// RFC 4648 §10, all seven, with the padding removed (§3.2 allows that when the
    /// length is known, and base64url here is always unpadded).
    static let rfc4648Vectors: [(String, String)] = [
        ("", ""),
        ("f", "Zg"),
        ("fo", "Zm8"),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg"),
        ("fooba", "Zm9vYmE"),
        ("foobar", "Zm9vYmFy"),
    ]

    @Test(arguments: rfc4648Vectors)
    func encodesRFC4648VectorWithoutPadding(plain: String, encoded: String) {
        #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
    }

    /// Foundation's base64 with the URL alphabet and no padding: an independent
    /// reference for the table-driven encoder.
    static func reference(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    @Test func appendMatchesTheReferenceAfterAPrefix() {
        for length in 0..<40 {
            let input = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 251) }
            var bytes: [UInt8] = []
            Base64URL.append(input, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == Self.reference(input))
            #expect(Base64URL.encode(input) == Self.reference(input))
            // A slice from inside a larger buffer (message ids come from a pool).
            let pool = [0xAA, 0x55, 0x0F] + input + [0xF0]
            #expect(Base64URL.encode(pool[3..<(3 + length)]) == Self.reference(input))
        }
        // Every byte value in each of a group's three positions, after a prefix
        // (a payload's JSON), so every 12-bit pair entry is exercised.
        var everyByte: [UInt8] = []
        for value in 0...255 {
            let byte = UInt8(value)
            everyByte += [byte, byte &* 7, 255 - byte, byte &+ 85, byte, byte &* 13]
        }
        var bytes = Array(#"{"c":""#.utf8)
        Base64URL.append(everyByte + [1], to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"c":""# + Self.reference(everyByte + [1]))
    }

    @Test(arguments: rfc4648Vectors)
    func decodesUnpaddedRFC4648Vector(plain: String, encoded: String) {
        #expect(Base64URL.decode(encoded) == Array(plain.utf8))
    }

    @Test func usesDashAndUnderscoreWhereStandardBase64HasPlusAndSlash() {
        // Standard base64 of FB FF BF is "+/+/"; of FB FF it is "+/8=".
        #expect(Base64URL.encode([0xFB, 0xFF, 0xBF]) == "-_-_")
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
        #expect(Base64URL.decode("-_-_") == [0xFB, 0xFF, 0xBF])
        #expect(Base64URL.decode("-_8") == [0xFB, 0xFF])
    }

    @Test(arguments: [
        "Zg==", "Zm8=", "Zm9vYg==", "Zg=", "+/8", "-_+_", "-_/_", "Zm9\n", " Zm9", "Zm 9v8", "Zm9v.", "Zm9v\0", "é",
        "Zm9vYg\u{FF}",
    ])
    func rejectsPaddingPlusSlashAndCharactersOutsideTheAlphabet(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test(arguments: ["Z", "Zm9vY", "Zm9vYmFyZ"])
    func rejectsLengthsThatNoByteCountEncodesTo(text: String) {
        #expect(Base64URL.decode(text) == nil)
    }

    @Test func rejectsNonZeroUnusedBitsSoEachByteStringHasOneEncoding() {
        // "Zg" is "f"; "Zh" carries the same byte with a stray low bit set.
        #expect(Base64URL.decode("Zh") == nil)
        #expect(Base64URL.decode("Zm9") == nil)
        #expect(Base64URL.decode("Zm8") == Array("fo".utf8))
    }

    @Test func roundTripsEveryByteValueAndEveryLengthUpTo64() {
        let allBytes = [UInt8](0...255)
        #expect(Base64URL.decode(Base64URL.encode(allBytes)) == allBytes)
        for length in 0...64 {
            let bytes = SecureRandom.bytes(length)
            let encoded = Base64URL.encode(bytes)
            #expect(encoded.utf8.count == (length * 4 + 2) / 3)
            #expect(!encoded.contains("="))
            #expect(Base64URL.decode(encoded) == bytes)
        }
    }

    @Test func decodesSubstringsAsJWTPartsAre() {
        let token = "Zm9v.YmFy"
        let parts = token.split(separator: ".")
        #expect(Base64URL.decode(parts[0]) == Array("foo".utf8))
        #expect(Base64URL.decode(parts[1]) == Array("bar".utf8))
    }
}
