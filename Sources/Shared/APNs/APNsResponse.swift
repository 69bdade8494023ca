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

    /// The UUID written in `chars`, as `uuid(_:)` reads it: every digit through one
    /// table load, no branch per digit (every answer carries one).
    static func uuid(_ chars: UnsafeBufferPointer<UInt8>) -> UUID? {
        let dash = UInt8(ascii: "-")
        guard chars.count == 36, chars[8] == dash, chars[13] == dash, chars[18] == dash, chars[23] == dash else {
            return nil
        }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        // `notHex` (0xF0) in a value marks a byte that is not a hex digit: its high bits survive the OR.
        var seen: UInt8 = 0
        hexValues.withUnsafeBufferPointer { values in
            withUnsafeMutableBytes(of: &bytes) { out in
                var position = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 { position += 1 }
                    let (high, low) = (values[Int(chars[position])], values[Int(chars[position + 1])])
                    seen |= high | low
                    out[index] = high << 4 | low
                    position += 2
                }
            }
        }
        return seen & notHex == 0 ? UUID(uuid: bytes) : nil
    }

    /// 0-9, a-f or A-F as a number, by byte; `notHex` for anything else.
    private static let notHex: UInt8 = 0xF0
    private static let hexValues: [UInt8] = (0...255).map { (byte: UInt8) -> UInt8 in
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: notHex
        }
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
