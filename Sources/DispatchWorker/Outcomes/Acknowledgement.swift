/// What is written to Redis when a message's outcome is final: the entry is
/// acknowledged and deleted, and, as the outcome requires, its quota reservation
/// released and its reply list answered, all in one `MULTI`.
struct Acknowledgement: Sendable {
    let context: StreamContext
    let entryID: String
    /// `DECR` this quota key (failed, expired, gone: never counted against the quota).
    let releaseQuotaKey: String?
    /// `RPUSH` this JSON to this list.
    let reply: (key: String, json: String)?
}

/// The JSON a reply list receives (see `QueueMessage`).
enum ReplyJSON {
    static func make(messageID: String, status: String, reason: String) -> String {
        var bytes: [UInt8] = Array(#"{"mid":"#.utf8)
        NotificationBuilder.appendJSONString(messageID, to: &bytes)
        bytes += Array(#","status":"#.utf8)
        NotificationBuilder.appendJSONString(status, to: &bytes)
        bytes += Array(#","reason":"#.utf8)
        NotificationBuilder.appendJSONString(reason, to: &bytes)
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
