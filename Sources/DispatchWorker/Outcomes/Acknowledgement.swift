import Shared

/// What is written to Redis when a message's outcome is final: the entry is
/// acknowledged and deleted, and, as the outcome requires, its quota reservation
/// released and its reply list answered, all in one script run (`QueueScripts.acknowledge`); once that is written
/// the outcome is added to the daily counts.
struct Acknowledgement: Sendable {
    let delivery: Delivery
    /// The daily count the outcome adds to.
    let tally: DailyCounts.Kind
    /// `DECR` the message's quota key (failed, expired, gone: never counted against the quota).
    let releaseQuota: Bool
    /// `RPUSH`ed to the message's reply list (which it has when this is set).
    let replyJSON: String?

    /// Nothing to write but the acknowledgement (the usual `sent`).
    var isPlain: Bool { !releaseQuota && replyJSON == nil }
}

/// The JSON a reply list receives (see `QueueMessage`).
enum ReplyJSON {
    static func make(messageID: String, status: String, reason: String) -> String {
        var bytes: [UInt8] = Array(#"{"mid":"#.utf8)
        JSONString.append(messageID, to: &bytes)
        bytes += Array(#","status":"#.utf8)
        JSONString.append(status, to: &bytes)
        bytes += Array(#","reason":"#.utf8)
        JSONString.append(reason, to: &bytes)
        bytes.append(UInt8(ascii: "}"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
