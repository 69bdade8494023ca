import Foundation
import Shared

/// Turns a queue message into the APNs request DESIGN.md's "Delivery semantics"
/// describes: `apns-push-type: alert`, topic = bundle id, the message's priority,
/// `apns-expiration` (0 stays 0), `apns-collapse-id`, and the payload
/// `{"aps":{"alert":{"title":…,"body":…},"mutable-content":1},"c":"<base64url …>"}`
/// (no `title` when the subscription has none) with `c` left out when the payload would pass APNs's 4096-byte limit (the app
/// then shows the placeholder).
enum NotificationBuilder {
    static let maximumPayloadBytes = 4096

    /// The notifications of a batch, in order, written into one buffer straight from
    /// the messages' bytes: no strings, and no payload array per message.
    static func notifications(for batch: [Delivery]) -> APNsNotificationBatch {
        var omitted: Set<Int> = []
        return notifications(for: batch, omittedCiphertexts: &omitted)
    }

    /// `notifications(for:)`, adding to `omittedCiphertexts` the positions in `batch`
    /// of the payloads that left out `c`.
    static func notifications(for batch: [Delivery], omittedCiphertexts: inout Set<Int>) -> APNsNotificationBatch {
        var bytes = 0
        for delivery in batch {
            let message = delivery.message
            bytes +=
                message.deviceTokenBytes.count + message.topicBytes.count + (message.collapseIDBytes?.count ?? 0)
                + payloadCapacity(for: message)
        }
        var notifications = APNsNotificationBatch(reservingCapacity: batch.count, bytes: bytes)
        for (index, delivery) in batch.enumerated() {
            let message = delivery.message
            notifications.append(
                deviceToken: message.deviceTokenBytes, topic: message.topicBytes, pushType: .alert,
                priority: APNsPriority(rawValue: message.priority), expiration: expiration(of: message),
                collapseID: message.collapseIDBytes
            ) {
                if !appendPayload(for: message, to: &$0) { omittedCiphertexts.insert(index) }
            }
        }
        return notifications
    }

    /// `apns-expiration`: 0 stays 0 ("now or never").
    private static func expiration(of message: QueueMessage) -> APNsExpiration {
        message.expiration == 0 ? .immediately : .at(Date(timeIntervalSince1970: TimeInterval(message.expiration)))
    }

    /// Room for the payload: the JSON around the three strings is 67 bytes; a few
    /// more cover the odd escape. Short by even one byte, an append would copy the
    /// buffer into one twice its size.
    private static func payloadCapacity(for message: QueueMessage) -> Int {
        80 + message.alertTitleBytes.count + message.alertBodyBytes.count
            + (message.ciphertextBytes.count * 4 + 2) / 3
    }

    /// Appends the payload to `bytes` (which may hold other things before it); false
    /// when it left out `c`.
    private static func appendPayload(for message: QueueMessage, to bytes: inout [UInt8]) -> Bool {
        let start = bytes.count
        // Read in place from the message's buffer: no copy of the ciphertext, no strings.
        let (title, body, ciphertext) = (message.alertTitleBytes, message.alertBodyBytes, message.ciphertextBytes)
        let encodedLength = (ciphertext.count * 4 + 2) / 3
        // A subscription registered without a title has none: no empty title line.
        if title.isEmpty {
            bytes.append(contentsOf: #"{"aps":{"alert":{"body":"#.utf8)
        } else {
            bytes.append(contentsOf: #"{"aps":{"alert":{"title":"#.utf8)
            JSONString.append(utf8: title, to: &bytes)
            bytes.append(contentsOf: #","body":"#.utf8)
        }
        JSONString.append(utf8: body, to: &bytes)
        bytes.append(contentsOf: #"},"mutable-content":1}"#.utf8)
        // `,"c":"` + text + `"` + the closing `}`.
        let fits = bytes.count - start + 7 + encodedLength + 1 <= maximumPayloadBytes
        if fits {
            bytes.append(contentsOf: #","c":""#.utf8)
            Base64URL.append(ciphertext, to: &bytes)
            bytes.append(UInt8(ascii: "\""))
        }
        bytes.append(UInt8(ascii: "}"))
        return fits
    }
}
