import Foundation
import Shared

/// The RFC 8030 / 8291 request headers of a Web Push delivery, validated.
struct WebPushHeaders: Sendable, Equatable {
    /// How the body carries the aes128gcm message.
    enum BodyFormat: Sendable, Equatable {
        /// `Content-Encoding: aes128gcm`: the body is the message (RFC 8291).
        case aes128gcm
        /// No `Content-Encoding`, `Content-Type: application/json`: the body is the
        /// message's base64url text (bare or as a JSON string).
        case base64URLText
        /// `Content-Encoding: aes128gcm` with `Content-Type: application/json`: older
        /// Stalwart releases send the message's (padded) base64url text this way, other
        /// senders the message itself; the body tells them apart
        /// (`AES128GCMMessage.isBinary`).
        case aes128gcmOrText
    }

    /// The `TTL` kept, in seconds (capped at the configured maximum).
    let ttl: Int
    /// `apns-priority`: 5 for Urgency very-low and low, else 10.
    let priority: Int
    /// The `Topic` header: replaces earlier undelivered messages with the same topic.
    let topic: String?
    let bodyFormat: BodyFormat

    init(_ headers: HTTPHeaders, maximumTTL: Int) throws(PushAPIError) {
        guard let ttlText = headers["TTL"]?.trimmingWhitespace else {
            throw .invalid("TTL header is required")
        }
        guard !ttlText.isEmpty, ttlText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw .invalid("TTL must be a non-negative integer")
        }
        // All digits: anything that does not fit is larger than the cap anyway.
        ttl = min(Int(ttlText) ?? Int.max, maximumTTL)

        switch headers["Urgency"]?.trimmingWhitespace.lowercasedUnlessLower {
        case nil, "normal", "high": priority = 10
        case "very-low", "low": priority = 5
        default: throw .invalid("Urgency must be very-low, low, normal or high")
        }

        if let topic = headers["Topic"]?.trimmingWhitespace {
            guard !topic.isEmpty, topic.utf8.count <= 32, topic.utf8.allSatisfy(Self.isBase64URLCharacter) else {
                throw .invalid("Topic must be 1 to 32 base64url characters")
            }
            self.topic = topic
        } else {
            topic = nil
        }

        let json = Self.isJSON(headers)
        if let encoding = headers["Content-Encoding"]?.trimmingWhitespace {
            guard encoding.lowercasedUnlessLower == "aes128gcm" else {
                throw .invalid("Content-Encoding must be aes128gcm")
            }
            bodyFormat = json ? .aes128gcmOrText : .aes128gcm
        } else if json {
            bodyFormat = .base64URLText
        } else {
            throw .invalid("Content-Encoding must be aes128gcm")
        }
    }

    /// Whether the body may be base64url text: `Content-Type: application/json`.
    static func isJSON(_ headers: HTTPHeaders) -> Bool {
        headers["Content-Type"]?.lowercasedUnlessLower.hasPrefix("application/json") == true
    }

    static func isBase64URLCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }
}

extension String {
    /// `trimmingCharacters(in: .whitespaces)`, without Foundation's cost for the
    /// usual value that neither starts nor ends with a space, a tab or a non-ASCII
    /// character (those still go through Foundation, so the result is the same).
    fileprivate var trimmingWhitespace: String {
        guard let first = utf8.first, let last = utf8.last else { return self }
        func plain(_ byte: UInt8) -> Bool { byte < 0x80 && byte != 0x20 && byte != 0x09 }
        return plain(first) && plain(last) ? self : trimmingCharacters(in: .whitespaces)
    }

    /// `lowercased()`, skipped when the text is ASCII without capitals (the usual header value).
    fileprivate var lowercasedUnlessLower: String {
        utf8.allSatisfy { $0 < 0x80 && !($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) } ? self : lowercased()
    }
}
