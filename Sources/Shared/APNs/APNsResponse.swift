import Foundation

/// APNs's answer to one notification request.
public struct APNsResponse: Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status: 200 on success.
    public let status: Int
    /// `apns-id`: the request's id (ours, or the one APNs made).
    public let apnsID: UUID?
    /// Why it failed; nil on success (or for an error without a readable body).
    public let reason: APNsReason?

    public init(status: Int, apnsID: UUID?, reason: APNsReason?) {
        self.status = status
        self.apnsID = apnsID
        self.reason = reason
    }

    /// The header fields a response is read from.
    static let headerNames: [StaticString] = [":status", "apns-id"]

    /// A response from HTTP/2 headers and body; nil without a valid `:status`.
    init?(headers: [HTTP2Header], body: [UInt8]) {
        self.init(fields: HTTP2ReceivedFields(headers), body: body)
    }

    /// A response from the received header fields and body, read in place (the
    /// `apns-id` of every answer is parsed from its bytes, never made a String).
    init?(fields: HTTP2ReceivedFields, body: [UInt8]) {
        guard let status = fields.withValue(of: ":status", Self.statusCode) ?? nil else { return nil }
        self.status = status
        self.apnsID = fields.withValue(of: "apns-id", Self.uuid) ?? nil
        self.reason = status == 200 ? nil : APNsReason(body: body)
    }

    public var isSuccess: Bool { status == 200 }

    /// A `:status` value: three digits (RFC 9113 §8.3.2, which nghttp2 enforces),
    /// read from its bytes without making a String.
    static func statusCode(_ chars: UnsafeBufferPointer<UInt8>) -> Int? {
        guard chars.count == 3 else { return nil }
        var status = 0
        for char in chars {
            let digit = char &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            status = status * 10 + Int(digit)
        }
        return status
    }

    /// The UUID written as `text` (8-4-4-4-12 hex digits, either case), as
    /// `UUID(uuidString:)` reads it but without its `sscanf`: every answer has one.
    static func uuid(_ text: String) -> UUID? {
        var text = text
        return text.withUTF8(uuid)
    }

    /// The UUID written in `chars`, as `uuid(_:)` reads it.
    static func uuid(_ chars: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard chars.count == 36 else { return nil }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = withUnsafeMutableBytes(of: &bytes) { out -> Bool in
            var position = 0
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    guard chars[position] == UInt8(ascii: "-") else { return false }
                    position += 1
                }
                guard let high = hexValue(chars[position]), let low = hexValue(chars[position + 1]) else {
                    return false
                }
                out[index] = high << 4 | low
                position += 2
            }
            return true
        }
        return parsed ? UUID(uuid: bytes) : nil
    }

    /// 0-9, a-f or A-F as a number (`| 0x20` makes a letter lower-case); nil for anything else.
    private static func hexValue(_ char: UInt8) -> UInt8? {
        let digit = char &- UInt8(ascii: "0")
        if digit < 10 { return digit }
        let letter = (char | 0x20) &- UInt8(ascii: "a")
        return letter < 6 ? letter + 10 : nil
    }

    /// For `Unregistered`, when APNs last confirmed the token was no longer valid.
    public var unregisteredTimestamp: Date? {
        if case .unregistered(let timestamp) = reason { return timestamp }
        return nil
    }

    public var description: String {
        "APNsResponse(\(status)\(reason.map { " \($0)" } ?? ""), apns-id: \(apnsID?.uuidString ?? "-"))"
    }
}
