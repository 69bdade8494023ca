extension APNsNotification {
    /// The HTTP/2 request headers for this notification, sent to `authority` with
    /// `providerToken` as the bearer. Throws `invalidRequest` (naming the field,
    /// never its value) for a device token that is not hex or header values that
    /// could not be sent as they are. The client sends the same fields, from the
    /// `APNsNotificationBatch` it sends.
    func requestHeaders(authority: String, providerToken: String) throws(APNsClientError) -> [HTTP2Header] {
        let batch = APNsNotificationBatch(CollectionOfOne(self))
        try batch.validate(0)
        var fields = HTTP2HeaderFields()
        batch.appendRequestHeaders(of: 0, to: &fields, authority: authority, providerToken: providerToken)
        return fields.headers
    }
}
