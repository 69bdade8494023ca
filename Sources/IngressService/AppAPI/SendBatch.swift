import Foundation
import Shared

/// The parsed body of `POST /send`: 1–100 messages `{subscriptionId, payload, urgency}`.
struct SendBatch: Sendable {
    static let maximumMessages = 100
    static let maximumPayloadBytes = 8 * 1024
    /// The largest request body: 100 messages with a full 8 KB payload each (base64url,
    /// ~10.9 KB) plus room per message for its id, urgency and JSON punctuation.
    static let maximumBodyBytes = maximumMessages * ((maximumPayloadBytes + 2) / 3 * 4 + 512)

    struct Message: Sendable {
        let subscriptionID: String
        /// The decoded ciphertext; nil when `payload` is not base64url or over 8 KB.
        let ciphertext: [UInt8]?
        /// `apns-priority`: 5 for `low` / `very-low`, else 10.
        let priority: Int
    }

    let messages: [Message]

    init(json body: [UInt8]) throws(AppAPIError) {
        guard StrictJSON.isWellFormed(body),
            let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let list = object["messages"] as? [Any]
        else { throw AppAPIError.invalid("body must be {\"messages\": [...]}") }
        guard (1...Self.maximumMessages).contains(list.count) else {
            throw AppAPIError.invalid("messages must hold 1 to \(Self.maximumMessages) entries")
        }
        var messages: [Message] = []
        for item in list {
            // An empty id names no subscription: that message is `not_found`, as any unknown id is.
            guard let fields = item as? [String: Any], let id = fields["subscriptionId"] as? String else {
                throw AppAPIError.invalid("each message needs a subscriptionId string")
            }
            var ciphertext: [UInt8]? = nil
            if let payload = fields["payload"] as? String, let bytes = Self.decodePayload(payload), !bytes.isEmpty,
                bytes.count <= Self.maximumPayloadBytes
            {
                ciphertext = bytes
            }
            messages.append(
                Message(subscriptionID: id, ciphertext: ciphertext, priority: try Self.priority(of: fields["urgency"])))
        }
        self.messages = messages
    }

    /// `apns-priority` for a message's `urgency` (Web Push's values, any case; high
    /// when absent or null). Anything else is refused like Web Push's `Urgency` header, rather
    /// than sent at a priority the caller did not ask for.
    static func priority(of urgency: Any?) throws(AppAPIError) -> Int {
        guard let urgency, !(urgency is NSNull) else { return 10 }
        switch (urgency as? String)?.lowercased() {
        case "very-low", "low": return 5
        case "normal", "high": return 10
        default: throw AppAPIError.invalid("urgency must be very-low, low, normal or high")
        }
    }

    /// Base64url with or without its `=` padding (RFC 4648 §5 allows both; Python's
    /// `urlsafe_b64encode` keeps it). Padding must complete the last group of four.
    static func decodePayload(_ text: String) -> [UInt8]? {
        let padding = text.utf8.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding > 0 else { return Base64URL.decode(text) }
        guard padding <= 2, text.utf8.count % 4 == 0 else { return nil }
        return Base64URL.decode(text.dropLast(padding))
    }
}
