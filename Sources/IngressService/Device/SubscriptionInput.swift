import Foundation
import Shared

/// The register / update body of the device endpoints, decoded strictly (a wrong
/// JSON type is an error, not a coercion) and validated:
///
///     {"topic": "com.example.app", "token": "<hex>", "sandbox": false,
///      "alert": {"title": "Example", "body": "New message"},
///      "keys": {"p256dh": "<base64url point>", "auth": "<base64url 16 bytes>"}}
struct SubscriptionInput: Sendable, Equatable {
    static let maximumTitleLength = 200
    static let maximumBodyLength = 1000
    /// The placeholder alert must fit APNs's 4096-byte payload on its own (only the
    /// ciphertext is left out when the payload would be too large), so the texts are
    /// also limited in bytes as the payload's JSON carries them (`payloadLength`):
    /// 800 + 3000 + the 67 bytes of JSON around them stay under 4096.
    static let maximumTitleBytes = 800
    static let maximumBodyBytes = 3000
    static let defaultBody = "New notification"

    var topic: String?
    /// Lower-case hex.
    var token: String?
    var sandbox: Bool?
    var alertTitle: String?
    var alertBody: String?
    /// The uncompressed P-256 point, validated on the curve.
    var p256dh: [UInt8]?
    var auth: [UInt8]?

    /// Whether it changes what the hot path's cache entry holds (token, environment,
    /// alert): the keys and the last-seen time are not in it.
    var changesCachedFields: Bool { token != nil || sandbox != nil || alertTitle != nil || alertBody != nil }

    private struct Body: Decodable {
        var topic: String?
        var token: String?
        var sandbox: Bool?
        var alert: Alert?
        var keys: Keys?
    }
    private struct Alert: Decodable {
        var title: String?
        var body: String?
    }
    private struct Keys: Decodable {
        var p256dh: String?
        var auth: String?
    }

    private init() {}

    /// An update's body: as `init(json:)`, but an empty one (nothing but whitespace)
    /// changes nothing, so a bare PUT, as an app sends on launch, just refreshes the
    /// last-seen time.
    static func update(json: [UInt8]) throws(PushAPIError) -> SubscriptionInput {
        let isEmpty = json.allSatisfy { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        return isEmpty ? SubscriptionInput() : try SubscriptionInput(json: json)
    }

    init(json: [UInt8]) throws(PushAPIError) {
        // Foundation's decoder lets through a trailing comma, UTF-16, invalid UTF-8 in
        // a member it skips, and keeps the first of repeated names (most parsers the
        // last, so a proxy that checks the body would read another one).
        guard StrictJSON.isWellFormed(json) else {
            throw .invalid("body is not valid JSON (UTF-8, each member named once, at most 64 levels deep)")
        }
        let body: Body
        do {
            body = try JSONDecoder().decode(Body.self, from: Data(json))
        } catch let error as DecodingError {
            throw .invalid(Self.describe(error))
        } catch {
            throw .invalid("body must be a JSON object")
        }
        if let topic = body.topic {
            guard Self.isBundleID(topic) else { throw .invalid("topic must be a bundle id") }
            self.topic = topic
        }
        if let token = body.token {
            let count = token.utf8.count
            guard count >= 32, count <= 200, count % 2 == 0, token.utf8.allSatisfy(Self.isHexDigit) else {
                throw .invalid("token must be 32 to 200 hex digits")
            }
            self.token = token.lowercased()
        }
        sandbox = body.sandbox
        if let title = body.alert?.title {
            alertTitle = try Self.alertText(
                title, field: "alert.title", characters: Self.maximumTitleLength, bytes: Self.maximumTitleBytes)
        }
        if let text = body.alert?.body {
            let text = try Self.alertText(
                text, field: "alert.body", characters: Self.maximumBodyLength, bytes: Self.maximumBodyBytes)
            alertBody = text.isEmpty ? Self.defaultBody : text
        }
        if let keys = body.keys {
            guard let p256dhText = keys.p256dh, let authText = keys.auth else {
                throw .invalid("keys needs both p256dh and auth")
            }
            guard let point = Self.base64URL(p256dhText), point.count == 65, point[0] == 0x04 else {
                throw .invalid("keys.p256dh must be a base64url uncompressed P-256 point")
            }
            guard (try? P256PublicKey(uncompressedPoint: point)) != nil else {
                throw .invalid("keys.p256dh is not a point on P-256")
            }
            guard let auth = Self.base64URL(authText), auth.count == 16 else {
                throw .invalid("keys.auth must be 16 bytes, base64url")
            }
            p256dh = point
            self.auth = auth
        }
    }

    /// What registration requires on top of the per-field checks.
    func requireRegistrationFields() throws(PushAPIError) {
        guard topic != nil else { throw .invalid("topic is required") }
        guard token != nil else { throw .invalid("token is required") }
        guard sandbox != nil else { throw .invalid("sandbox is required (a boolean)") }
    }

    /// A placeholder text within its limits, without control characters (Postgres
    /// cannot store NUL, and APNs shows none of them).
    private static func alertText(
        _ text: String, field: String, characters: Int, bytes: Int
    ) throws(PushAPIError) -> String {
        guard text.count <= characters else { throw .invalid("\(field) must be at most \(characters) characters") }
        guard let length = payloadLength(text) else { throw .invalid("\(field) must not contain control characters") }
        guard length <= bytes else { throw .invalid("\(field) must be at most \(bytes) bytes") }
        return text
    }

    /// The bytes `text` takes in the notification payload, escaped as the worker
    /// writes it (`JSONString`, quotes left out); nil when it holds a control
    /// character other than tab, newline and carriage return.
    static func payloadLength(_ text: String) -> Int? {
        let control = text.utf8.contains { ($0 < 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D) || $0 == 0x7F }
        guard !control else { return nil }
        var literal: [UInt8] = []
        JSONString.append(text, to: &literal)
        return literal.count - 2
    }

    /// Whether `topic` could be a registered app identifier: 1 to 155 ASCII letters,
    /// digits, dots and hyphens (anything else could only fail the lookup, or, with
    /// a NUL, Postgres).
    static func isBundleID(_ topic: String) -> Bool {
        (1...155).contains(topic.utf8.count)
            && topic.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "-"):
                    true
                default: false
                }
            }
    }

    /// Unpadded base64url; trailing `=` padding tolerated.
    static func base64URL(_ text: String) -> [UInt8]? {
        var trimmed = Substring(text)
        while trimmed.hasSuffix("=") { trimmed = trimmed.dropLast() }
        return Base64URL.decode(trimmed)
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default: false
        }
    }

    /// Names the field and the problem, never the value.
    static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let field = path(context)
            if field.isEmpty { return "body must be a JSON object" }
            let expected = type == Bool.self ? "a boolean" : type == String.self ? "a string" : "an object"
            return "\(field) must be \(expected)"
        case .dataCorrupted(let context):
            let field = path(context)
            return field.isEmpty ? "body is not valid JSON" : "\(field) is invalid"
        case .keyNotFound:
            return "body is missing a field"
        @unknown default:
            return "body is invalid"
        }
    }
}
