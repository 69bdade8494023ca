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
        withUnsafePointer(to: self) { notification in
            Self.appendRequestHeaders(of: notification, to: &fields, authority: authority, providerToken: providerToken)
        }
        return fields
    }

    /// Adds the header fields of `notification`'s request to `fields`; the
    /// notification must have passed `validate()`. Takes a pointer so a caller
    /// reading it in place from an array does not copy it first.
    static func appendRequestHeaders(
        of notification: UnsafePointer<APNsNotification>, to fields: inout HTTP2HeaderFields, authority: String,
        providerToken: String
    ) {
        fields.append(":method", "POST")
        fields.append(":scheme", "https")
        fields.append(":authority", authority)
        fields.append(":path", prefix: "/3/device/", notification.pointee.deviceToken)
        fields.append("authorization", prefix: "bearer ", providerToken)
        fields.append("apns-topic", notification.pointee.topic)
        fields.append("apns-push-type", notification.pointee.pushType.rawValue)
        fields.append("apns-priority") { appendDecimal(notification.pointee.priority.rawValue, to: &$0) }
        if let expiration = notification.pointee.expiration {
            fields.append("apns-expiration") { appendDecimal(expiration.seconds, to: &$0) }
        }
        if let collapseID = notification.pointee.collapseID { fields.append("apns-collapse-id", collapseID) }
        if let apnsID = notification.pointee.apnsID { fields.append("apns-id") { appendLowercase(apnsID, to: &$0) } }
    }

    /// `value` in decimal, as `String(value)` writes it, without building the String.
    private static func appendDecimal<Value: BinaryInteger>(_ value: Value, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        let start = bytes.count
        repeat {
            bytes.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        bytes[start...].reverse()
    }

    /// Checks what would otherwise corrupt the request: the device token goes into
    /// the path, the others into header values.
    func validate() throws(APNsClientError) {
        try withUnsafePointer(to: self) { notification throws(APNsClientError) in try Self.validate(notification) }
    }

    /// `validate()` of the notification at `notification`, read field by field in
    /// place (calling a method on `pointee` would copy the whole notification first).
    static func validate(_ notification: UnsafePointer<APNsNotification>) throws(APNsClientError) {
        let deviceToken = notification.pointee.deviceToken
        guard !deviceToken.isEmpty, deviceToken.utf8.count <= 200, all(deviceToken, isHexDigit) else {
            throw APNsClientError(.invalidRequest, "the device token must be 1 to 200 hexadecimal characters")
        }
        let topic = notification.pointee.topic
        guard !topic.isEmpty, all(topic, isHeaderSafe) else {
            throw APNsClientError(.invalidRequest, "the topic must be non-empty visible ASCII")
        }
        let pushType = notification.pointee.pushType.rawValue
        guard !pushType.isEmpty, all(pushType, isHeaderSafe) else {
            throw APNsClientError(.invalidRequest, "the push type must be non-empty visible ASCII")
        }
        if let collapseID = notification.pointee.collapseID, !all(collapseID, isHeaderSafe) {
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
