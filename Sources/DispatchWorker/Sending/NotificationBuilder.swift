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

    /// The notifications of a batch, in order. A run of messages to one topic (one
    /// app's: the usual batch) shares one topic string instead of making one each.
    static func notifications(for batch: [Delivery]) -> [APNsNotification] {
        var notifications: [APNsNotification] = []
        notifications.reserveCapacity(batch.count)
        var topic = (index: -1, text: "")
        for (index, delivery) in batch.enumerated() {
            if index == 0 || !delivery.message.hasSameTopic(as: batch[topic.index].message) {
                topic = (index, delivery.message.topic)
            }
            notifications.append(notification(for: delivery.message, topic: topic.text))
        }
        return notifications
    }

    static func notification(for message: QueueMessage) -> APNsNotification {
        notification(for: message, topic: message.topic)
    }

    /// `topic` is the message's.
    private static func notification(for message: QueueMessage, topic: String) -> APNsNotification {
        APNsNotification(
            deviceToken: message.deviceToken, topic: topic, pushType: .alert,
            priority: APNsPriority(rawValue: message.priority),
            expiration: message.expiration == 0
                ? .immediately : .at(Date(timeIntervalSince1970: TimeInterval(message.expiration))),
            collapseID: message.collapseID, payload: payload(for: message))
    }

    static func payload(for message: QueueMessage) -> [UInt8] {
        var bytes: [UInt8] = []
        // Read in place from the message's buffer: no copy of the ciphertext, no strings.
        let (title, body, ciphertext) = (message.alertTitleBytes, message.alertBodyBytes, message.ciphertextBytes)
        let encodedLength = (ciphertext.count * 4 + 2) / 3
        // The JSON around the three strings is 67 bytes; a few more cover the odd escape.
        // Short by even one byte, the ciphertext's append would copy the payload into
        // a buffer twice its size, kept for as long as the request.
        bytes.reserveCapacity(80 + title.count + body.count + encodedLength)
        bytes.append(contentsOf: #"{"aps":{"alert":{"title":"#.utf8)
        appendJSONString(utf8: title, to: &bytes)
        bytes.append(contentsOf: #","body":"#.utf8)
        appendJSONString(utf8: body, to: &bytes)
        bytes.append(contentsOf: #"},"mutable-content":1}"#.utf8)
        // `,"c":"` + text + `"` + the closing `}`.
        if bytes.count + 7 + encodedLength + 1 <= maximumPayloadBytes {
            bytes.append(contentsOf: #","c":""#.utf8)
            Base64URL.append(ciphertext, to: &bytes)
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// `appendJSONString` of stored UTF-8 bytes: plain ASCII (alerts mostly are) is
    /// copied as it is; anything else goes through the `String` the property would
    /// give (invalid UTF-8 repaired, as when it is read as text).
    static func appendJSONString(utf8 text: ArraySlice<UInt8>, to bytes: inout [UInt8]) {
        guard text.allSatisfy({ $0 < 0x80 && !needsEscape($0) }) else {
            return appendJSONString(String(decoding: text, as: UTF8.self), to: &bytes)
        }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: text)
        bytes.append(UInt8(ascii: "\""))
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
