import Shared

/// Checks that a body is a well-formed RFC 8188 `aes128gcm` message as RFC 8291
/// uses it, without decrypting it (only the device can):
///
///     salt (16) | rs (4, big-endian) | idlen (1) = 65 | keyid (65): 0x04 X Y | one record
///
/// The keyid is the sender's ephemeral public key: one off the curve could never be
/// decrypted, so it is refused here rather than counted and sent. `rs` is at least
/// 18, and the single record holds at least a padding delimiter and the 16-byte tag
/// (17 bytes) and at most `rs` bytes.
enum AES128GCMMessage {
    static let headerLength = 16 + 4 + 1 + 65
    static let minimumRecordLength = 17

    static func validate(_ body: [UInt8]) throws(PushAPIError) {
        guard body.count >= headerLength + minimumRecordLength else {
            throw .invalid("body is not an aes128gcm message (too short)")
        }
        let recordSize = UInt32(body[16]) << 24 | UInt32(body[17]) << 16 | UInt32(body[18]) << 8 | UInt32(body[19])
        guard recordSize >= 18 else { throw .invalid("aes128gcm record size must be at least 18") }
        guard body[20] == 65, body[21] == 0x04 else {
            // The older text form under another Content-Type: name the real mistake.
            if body.allSatisfy(isBase64Text) {
                throw .invalid("body is base64 text: send it as Content-Type: application/json, or send the bytes")
            }
            throw .invalid("aes128gcm keyid must be an uncompressed P-256 point")
        }
        guard P256Curve.shared.contains(uncompressedPoint: body[21..<headerLength]) else {
            throw .invalid("aes128gcm keyid is not a point on P-256")
        }
        guard body.count - headerLength <= Int(recordSize) else {
            throw .invalid("aes128gcm body must be a single record")
        }
    }

    /// Whether `body` starts like the message itself rather than its base64url text:
    /// its keyid's first byte is 0x04, which no base64 character is.
    static func isBinary(_ body: [UInt8]) -> Bool {
        body.count > 21 && body[21] == 0x04
    }

    /// The message inside the older base64url text form (bare, or quoted as a JSON
    /// string; padding and the standard alphabet tolerated).
    static func decodeText(_ body: [UInt8]) throws(PushAPIError) -> [UInt8] {
        var text = body[...]
        while let first = text.first, first == 0x20 || first == 0x0a || first == 0x0d || first == 0x09 {
            text = text.dropFirst()
        }
        while let last = text.last, last == 0x20 || last == 0x0a || last == 0x0d || last == 0x09 {
            text = text.dropLast()
        }
        // A JMAP server pushes its StateChange in clear, as a JSON object, to a
        // subscription created without keys: say so, rather than "not base64url".
        if text.first == UInt8(ascii: "{") {
            throw .invalid("body is not encrypted: the push subscription needs the device's keys (RFC 8291)")
        }
        if text.count >= 2, text.first == UInt8(ascii: "\""), text.last == UInt8(ascii: "\"") {
            text = text.dropFirst().dropLast()
        }
        while text.last == UInt8(ascii: "=") { text = text.dropLast() }
        let normalized = text.map { byte -> UInt8 in
            switch byte {
            case UInt8(ascii: "+"): UInt8(ascii: "-")
            case UInt8(ascii: "/"): UInt8(ascii: "_")
            default: byte
            }
        }
        guard let bytes = Base64URL.decode(String(decoding: normalized, as: UTF8.self)) else {
            throw .invalid("body is not base64url")
        }
        // The same clear StateChange, only base64url-encoded. A message's salt is
        // random and may well start with "{" too: its keyid's 0x04 tells them apart.
        if bytes.first == UInt8(ascii: "{"), !isBinary(bytes) {
            throw .invalid("body is not encrypted: the push subscription needs the device's keys (RFC 8291)")
        }
        return bytes
    }

    /// A character of base64 or base64url text, padding and line ends included.
    private static func isBase64Text(_ byte: UInt8) -> Bool {
        if WebPushHeaders.isBase64URLCharacter(byte) { return true }
        switch byte {
        case UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="), 0x0a, 0x0d: return true
        default: return false
        }
    }
}
