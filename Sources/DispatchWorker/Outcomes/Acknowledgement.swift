import Shared

/// What is written to Redis when an entry's messages all have their outcomes: the
/// entry is acknowledged and deleted and, as each message's outcome requires, its
/// quota reservation released, its reply list answered or the message put on the
/// delayed-retry set, and its daily count added, all in one script run
/// (`QueueScripts.acknowledge`); once that is written the sent messages' last-push
/// times are recorded (`DailyCounts`).
struct Acknowledgement: Sendable {
    let entry: PendingEntry
    let items: [Item]

    /// One message's outcome.
    struct Item: Sendable {
        let delivery: Delivery
        /// The daily count the outcome adds to; nil for a retry, which is not final.
        let tally: DailyCounts.Kind?
        /// `DECR` the message's quota key (failed, expired, gone: never counted against the quota).
        let releaseQuota: Bool
        /// `RPUSH`ed to the message's reply list (which it has when this is set).
        let replyJSON: String?
        /// Put back on the stream later, as a new entry of its own.
        let retry: Retry?

        /// Nothing to write but the acknowledgement (the usual `sent`).
        var isPlain: Bool { !releaseQuota && replyJSON == nil && retry == nil }
    }

    /// A message to send again after `delayMilliseconds`, with `attempts` made so far.
    struct Retry: Sendable {
        let delayMilliseconds: Int
        let attempts: Int
        /// Why (the metric's label).
        let cause: String
        /// APNs's answer, when only writing it failed (`KnownOutcome`): written on the
        /// next turn instead of sending again.
        var knownOutcome: String? = nil

        /// The message's fields on the delayed-retry set: the message alone (format 2)
        /// with its attempts, as `QueueScripts.promoteRetries` adds it back.
        func fields(of message: QueueMessage) -> [[UInt8]] {
            var retried = message
            retried.attempts = attempts
            retried.knownOutcome = knownOutcome
            return retried.fields
        }
    }

    /// Nothing to write but the acknowledgement: every message was sent.
    var isPlain: Bool { items.allSatisfy(\.isPlain) }
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
