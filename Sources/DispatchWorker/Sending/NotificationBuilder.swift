import Foundation
import Shared

/// Turns a queue message into the APNs request DESIGN.md's "Delivery semantics"
/// describes: `apns-push-type: alert`, topic = bundle id, the message's priority,
/// `apns-expiration` (0 stays 0), `apns-collapse-id`, and the payload
/// `{"aps":{"alert":{"title":…,"body":…},"mutable-content":1},"c":"<base64url ciphertext>"}`
/// with `c` left out when the payload would pass APNs's 4096-byte limit (the app
/// then shows the placeholder).
enum NotificationBuilder {
    static let maximumPayloadBytes = 4096

    static func notification(for message: QueueMessage) -> APNsNotification {
        APNsNotification(
            deviceToken: message.deviceToken, topic: message.topic, pushType: .alert,
            priority: APNsPriority(rawValue: message.priority),
            expiration: message.expiration == 0
                ? .immediately : .at(Date(timeIntervalSince1970: TimeInterval(message.expiration))),
            collapseID: message.collapseID, payload: payload(for: message))
    }

    static func payload(for message: QueueMessage) -> [UInt8] {
        var bytes: [UInt8] = []
        let encodedLength = (message.ciphertext.count * 4 + 2) / 3
        // The JSON around the three strings is 67 bytes; a few more cover the odd escape.
        // Short by even one byte, the ciphertext's append would copy the payload into
        // a buffer twice its size, kept for as long as the request.
        bytes.reserveCapacity(80 + message.alertTitle.utf8.count + message.alertBody.utf8.count + encodedLength)
        bytes.append(contentsOf: #"{"aps":{"alert":{"title":"#.utf8)
        appendJSONString(message.alertTitle, to: &bytes)
        bytes.append(contentsOf: #","body":"#.utf8)
        appendJSONString(message.alertBody, to: &bytes)
        bytes.append(contentsOf: #"},"mutable-content":1}"#.utf8)
        // `,"c":"` + text + `"` + the closing `}`.
        if bytes.count + 7 + encodedLength + 1 <= maximumPayloadBytes {
            bytes.append(contentsOf: #","c":""#.utf8)
            appendBase64URL(message.ciphertext, to: &bytes)
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The two characters of every 12-bit value, first one in the low byte: three
    /// input bytes become two lookups and two 2-byte stores instead of four and four.
    private static let pairs: [UInt16] = (0..<4096).map {
        UInt16(alphabet[$0 >> 6]) | UInt16(alphabet[$0 & 0x3F]) << 8
    }

    /// Unpadded base64url of `input` (as `Base64URL.encode`), written straight into the payload.
    static func appendBase64URL(_ input: [UInt8], to bytes: inout [UInt8]) {
        let start = bytes.count
        let length = (input.count * 4 + 2) / 3
        bytes.append(contentsOf: repeatElement(0, count: length))
        pairs.withUnsafeBufferPointer { pairs in
            alphabet.withUnsafeBufferPointer { table in
                input.withUnsafeBufferPointer { source in
                    bytes.withUnsafeMutableBytes { output in
                        var index = 0
                        var out = start
                        let count = source.count
                        while index + 3 <= count {
                            let group =
                                Int(source[index]) << 16 | Int(source[index + 1]) << 8 | Int(source[index + 2])
                            output.storeBytes(of: pairs[group >> 12].littleEndian, toByteOffset: out, as: UInt16.self)
                            output.storeBytes(
                                of: pairs[group & 0xFFF].littleEndian, toByteOffset: out + 2, as: UInt16.self)
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
        }
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped,
    /// everything else (UTF-8 included) as it is.
    static func appendJSONString(_ text: String, to bytes: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"  // no array built per call: this runs per message
        bytes.append(UInt8(ascii: "\""))
        // Alerts rarely need escaping: then one copy instead of a byte-by-byte walk.
        var text = text
        let copied = text.withUTF8 { utf8 in
            guard !utf8.contains(where: needsEscape) else { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if copied { return bytes.append(UInt8(ascii: "\"")) }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): bytes.append(contentsOf: #"\\"#.utf8)
            case 0x0A: bytes.append(contentsOf: #"\n"#.utf8)
            case 0x0D: bytes.append(contentsOf: #"\r"#.utf8)
            case 0x09: bytes.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20, 0x7F:
                bytes.append(contentsOf: #"\u00"#.utf8)
                bytes.append(hex.utf8Start[Int(byte >> 4)])
                bytes.append(hex.utf8Start[Int(byte & 0x0F)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }
}
