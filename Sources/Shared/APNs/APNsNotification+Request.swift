extension APNsNotification {
    /// The HTTP/2 request headers for this notification, sent to `authority` with
    /// `providerToken` as the bearer. Throws `invalidRequest` (naming the field,
    /// never its value) for a device token that is not hex or header values that
    /// could not be sent as they are.
    func requestHeaders(authority: String, providerToken: String) throws(APNsClientError) -> [HTTP2Header] {
        try validate()
        var headers = [
            HTTP2Header(":method", "POST"),
            HTTP2Header(":scheme", "https"),
            HTTP2Header(":authority", authority),
            HTTP2Header(":path", "/3/device/\(deviceToken)"),
            HTTP2Header("authorization", "bearer \(providerToken)"),
            HTTP2Header("apns-topic", topic),
            HTTP2Header("apns-push-type", pushType.rawValue),
            HTTP2Header("apns-priority", String(priority.rawValue)),
        ]
        if let expiration { headers.append(HTTP2Header("apns-expiration", expiration.headerValue)) }
        if let collapseID { headers.append(HTTP2Header("apns-collapse-id", collapseID)) }
        if let apnsID { headers.append(HTTP2Header("apns-id", apnsID.uuidString.lowercased())) }
        return headers
    }

    /// Checks what would otherwise corrupt the request: the device token goes into
    /// the path, the others into header values.
    func validate() throws(APNsClientError) {
        guard !deviceToken.isEmpty, deviceToken.utf8.count <= 200, deviceToken.utf8.allSatisfy(Self.isHexDigit) else {
            throw APNsClientError(.invalidRequest, "the device token must be 1 to 200 hexadecimal characters")
        }
        guard Self.isHeaderSafe(topic), !topic.isEmpty else {
            throw APNsClientError(.invalidRequest, "the topic must be non-empty visible ASCII")
        }
        guard Self.isHeaderSafe(pushType.rawValue), !pushType.rawValue.isEmpty else {
            throw APNsClientError(.invalidRequest, "the push type must be non-empty visible ASCII")
        }
        if let collapseID, !Self.isHeaderSafe(collapseID) {
            throw APNsClientError(.invalidRequest, "the collapse id must not contain control characters")
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    /// No control characters (CR, LF, NUL…) that could split or end a header.
    private static func isHeaderSafe(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F }
    }
}
