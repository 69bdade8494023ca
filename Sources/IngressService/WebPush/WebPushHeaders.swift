import Foundation
import Shared

/// The RFC 8030 / 8291 request headers of a Web Push delivery, validated.
struct WebPushHeaders: Sendable, Equatable {
    /// How the body carries the aes128gcm message.
    enum BodyFormat: Sendable, Equatable {
        /// `Content-Encoding: aes128gcm`: the body is the message (RFC 8291).
        case aes128gcm
        /// `Content-Type: application/json`, with or without `Content-Encoding:
        /// aes128gcm`: older Stalwart releases send the message's base64url text (bare,
        /// padded or as a JSON string) this way, other senders the message itself
        /// (Apache James, without `Content-Encoding`); the body tells them apart
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

    /// `bodyIsEmpty` only names the mistake of a push without `Content-Encoding`.
    init(_ headers: HTTPHeaders, maximumTTL: Int, bodyIsEmpty: Bool = false) throws(PushAPIError) {
        let fields = try Fields(headers)
        guard let ttlText = fields.ttl?.trimmingWhitespace else {
            throw .invalid("TTL header is required")
        }
        guard !ttlText.isEmpty, ttlText.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw .invalid("TTL must be a non-negative integer")
        }
        // All digits: anything that does not fit is larger than the cap anyway.
        ttl = min(Int(ttlText) ?? Int.max, maximumTTL)

        switch fields.urgency?.trimmingWhitespace.lowercasedUnlessLower {
        case nil, "normal", "high": priority = 10
        case "very-low", "low": priority = 5
        default: throw .invalid("Urgency must be very-low, low, normal or high")
        }

        if let topic = fields.topic?.trimmingWhitespace {
            guard Self.isValidTopic(topic) else { throw .invalid("Topic must be 1 to 32 base64url characters") }
            self.topic = topic
        } else {
            topic = nil
        }

        let json = fields.contentType.map(Self.isJSON(contentType:)) ?? false
        if let encoding = fields.contentEncoding?.trimmingWhitespace {
            guard encoding.lowercasedUnlessLower == "aes128gcm" else {
                throw .invalid("Content-Encoding must be aes128gcm")
            }
            bodyFormat = json ? .aes128gcmOrText : .aes128gcm
        } else if json {
            bodyFormat = .aes128gcmOrText
        } else if bodyIsEmpty {
            // RFC 8030 allows a push without payload; the service only relays ciphertext.
            throw .invalid("the body is empty: a push must carry an aes128gcm message")
        } else {
            throw .invalid("Content-Encoding must be aes128gcm")
        }
    }

    /// RFC 8030's Topic: at most 32 characters of the base64url alphabet. Up to two
    /// trailing `=` (RFC 4648's optional padding) count among the 32: Apache James
    /// sends its 16-byte topics padded (24 characters ending in `==`).
    static func isValidTopic(_ topic: String) -> Bool {
        let bytes = topic.utf8
        guard bytes.count <= 32 else { return false }
        var characters = bytes[...]
        for _ in 0..<2 where characters.last == UInt8(ascii: "=") { characters = characters.dropLast() }
        return !characters.isEmpty && characters.allSatisfy(isBase64URLCharacter)
    }

    /// The headers read here, from one pass over the request's. `TTL`, `Urgency`,
    /// `Topic` and `Content-Encoding` each hold one value: given twice with different
    /// values, which one the sender meant is unknowable, so that is a 400, not a
    /// guess. (`Content-Type`: the first, as `HTTPHeaders` reads it.)
    private struct Fields {
        var ttl, urgency, topic, contentEncoding, contentType: String?

        init(_ headers: HTTPHeaders) throws(PushAPIError) {
            for (name, value) in headers {
                // The length first: most fields are none of these, and it settles that cheaply.
                switch name.utf8.count {
                case 3 where name.caseInsensitiveEquals("TTL"): try Self.keep(value, in: &ttl, name: "TTL")
                case 5 where name.caseInsensitiveEquals("Topic"): try Self.keep(value, in: &topic, name: "Topic")
                case 7 where name.caseInsensitiveEquals("Urgency"):
                    try Self.keep(value, in: &urgency, name: "Urgency", ignoringCase: true)
                case 12 where contentType == nil && name.caseInsensitiveEquals("Content-Type"): contentType = value
                case 16 where name.caseInsensitiveEquals("Content-Encoding"):
                    try Self.keep(value, in: &contentEncoding, name: "Content-Encoding", ignoringCase: true)
                default: break
                }
            }
        }

        /// `ignoringCase`: for fields whose values are read without regard to case
        /// (`low` and `LOW` are one Urgency).
        private static func keep(
            _ value: String, in slot: inout String?, name: String, ignoringCase: Bool = false
        ) throws(PushAPIError) {
            guard let kept = slot else {
                slot = value
                return
            }
            let same =
                ignoringCase ? kept.trimmingWhitespace.caseInsensitiveEquals(value.trimmingWhitespace) : kept == value
            guard same else { throw .invalid("\(name) must be given once") }
        }
    }

    /// Whether the body may be base64url text: `Content-Type: application/json`.
    static func isJSON(_ headers: HTTPHeaders) -> Bool {
        headers["Content-Type"].map(isJSON(contentType:)) ?? false
    }

    /// `application/json`, with or without parameters (`; charset=utf-8`, or Apache
    /// James's `application/json charset=utf-8` without the `;`).
    private static func isJSON(contentType: String) -> Bool {
        let type = contentType.lowercasedUnlessLower.utf8
        guard type.starts(with: "application/json".utf8) else { return false }
        let next = type.dropFirst(16).first
        return next == nil || next == UInt8(ascii: ";") || next == UInt8(ascii: " ") || next == UInt8(ascii: "\t")
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
