import Foundation

extension APNsNotification {
    /// The HTTP/2 request headers for this notification, sent to `authority` with
    /// `providerToken` as the bearer. Throws `invalidRequest` (naming the field,
    /// never its value) for a device token that is not hex or header values that
    /// could not be sent as they are. The client sends the same `requestFields`,
    /// once `send` has validated the notification.
    func requestHeaders(authority: String, providerToken: String) throws(APNsClientError) -> [HTTP2Header] {
        try validate()
        return requestFields(authority: authority, providerToken: providerToken).headers
    }

    /// The request's header fields, in one buffer of the right size; the notification
    /// must have passed `validate()`.
    func requestFields(authority: String, providerToken: String) -> HTTP2HeaderFields {
        // Fixed parts (method, scheme, path and bearer prefixes, priority, expiration, apns-id) fit in 96 bytes.
        let variable =
            authority.utf8.count + deviceToken.utf8.count + providerToken.utf8.count + topic.utf8.count
            + pushType.rawValue.utf8.count + (collapseID?.utf8.count ?? 0)
        var fields = HTTP2HeaderFields(reservingCapacity: 11, bytes: variable + 96)
        appendRequestHeaders(to: &fields, authority: authority, providerToken: providerToken)
        return fields
    }

    /// Adds the request's header fields to `fields`; the notification must have passed `validate()`.
    func appendRequestHeaders(to fields: inout HTTP2HeaderFields, authority: String, providerToken: String) {
        fields.append(":method", "POST")
        fields.append(":scheme", "https")
        fields.append(":authority", authority)
        fields.append(":path", prefix: "/3/device/", deviceToken)
        fields.append("authorization", prefix: "bearer ", providerToken)
        fields.append("apns-topic", topic)
        fields.append("apns-push-type", pushType.rawValue)
        fields.append("apns-priority", String(priority.rawValue))
        if let expiration { fields.append("apns-expiration", expiration.headerValue) }
        if let collapseID { fields.append("apns-collapse-id", collapseID) }
        if let apnsID { fields.append("apns-id") { Self.appendLowercase(apnsID, to: &$0) } }
    }

    /// Checks what would otherwise corrupt the request: the device token goes into
    /// the path, the others into header values.
    func validate() throws(APNsClientError) {
        guard !deviceToken.isEmpty, deviceToken.utf8.count <= 200, Self.all(deviceToken, Self.isHexDigit) else {
            throw APNsClientError(.invalidRequest, "the device token must be 1 to 200 hexadecimal characters")
        }
        guard !topic.isEmpty, Self.all(topic, Self.isHeaderSafe) else {
            throw APNsClientError(.invalidRequest, "the topic must be non-empty visible ASCII")
        }
        guard !pushType.rawValue.isEmpty, Self.all(pushType.rawValue, Self.isHeaderSafe) else {
            throw APNsClientError(.invalidRequest, "the push type must be non-empty visible ASCII")
        }
        if let collapseID, !Self.all(collapseID, Self.isHeaderSafe) {
            throw APNsClientError(.invalidRequest, "the collapse id must not contain control characters")
        }
    }

    /// Whether every UTF-8 byte of `value` passes `test`, read in place from its
    /// storage (a generic walk of `utf8` costs more than the rest of the check;
    /// `withUTF8` would first copy a string that is not stored as UTF-8).
    @inline(__always)
    private static func all(_ value: String, _ test: (UInt8) -> Bool) -> Bool {
        if let result = value.utf8.withContiguousStorageIfAvailable({ $0.allSatisfy(test) }) { return result }
        var value = value
        return value.withUTF8 { $0.allSatisfy(test) }
    }

    /// 0-9, a-f or A-F: two comparisons (`| 0x20` makes a letter lower-case).
    private static func isHexDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10 || (byte | 0x20) &- UInt8(ascii: "a") < 6
    }

    /// No control characters (CR, LF, NUL…) that could split or end a header.
    private static func isHeaderSafe(_ byte: UInt8) -> Bool { byte >= 0x20 && byte != 0x7F }

    /// `uuid` in canonical lower-case form (8-4-4-4-12), without building a String.
    private static func appendLowercase(_ uuid: UUID, to bytes: inout [UInt8]) {
        let digits: StaticString = "0123456789abcdef"
        withUnsafeBytes(of: uuid.uuid) { raw in
            for (index, byte) in raw.enumerated() {
                if index == 4 || index == 6 || index == 8 || index == 10 { bytes.append(UInt8(ascii: "-")) }
                bytes.append(digits.utf8Start[Int(byte >> 4)])
                bytes.append(digits.utf8Start[Int(byte & 0x0F)])
            }
        }
    }
}
