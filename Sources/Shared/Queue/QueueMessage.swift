/// One push on the queue stream, with everything the dispatch worker needs to send
/// it without a Postgres query. Stored as the stream entry's field/value pairs
/// (binary safe: the ciphertext is raw bytes). The ingress's hot-path script writes
/// these fields (`HotPathScript`); `init(fields:)` / `init(entry:)` read them back.
///
/// | field | value |
/// |---|---|
/// | `v` | format version, `1` |
/// | `mid` | message id (22-char base64url), the tail of the `Location` URL |
/// | `sub` | subscription id |
/// | `app` | app id |
/// | `acct` | account id |
/// | `cred` | credential id chosen by the app at accept time |
/// | `topic` | bundle id (`apns-topic`) |
/// | `token` | device token, lower-case hex |
/// | `sandbox` | `1` APNs sandbox, `0` production |
/// | `title`, `body` | placeholder alert |
/// | `ct` | ciphertext: the aes128gcm body as received (raw bytes) |
/// | `prio` | `apns-priority`: `10`, or `5` for Urgency low / very-low |
/// | `exp` | `apns-expiration`, UNIX seconds; `0` = deliver now or never (TTL 0) |
/// | `collapse` | `apns-collapse-id` from the Web Push `Topic` header; absent when none |
/// | `at` | accepted at, UNIX milliseconds |
/// | `qk` | the quota key the worker decrements (`DECR`) if the send fails |
/// | `reply` | optional: a reply list for a sender that waits for the outcome (below) |
/// | `n` | optional: send attempts so far (the worker's delayed retries set it; absent = 0) |
///
/// **Reply lists** (App API sends that wait for their outcome). A sender that wants
/// the outcome puts a list key in `reply`, made with `RedisKeys.reply(_:)` (so it
/// carries the stream's hash tag), e.g. one per App API request, and waits on it with
/// `BLPOP`. When the message's outcome is recorded, in the same script run as the
/// entry's acknowledgement, the worker `RPUSH`es one JSON object
/// `{"mid":"<message id>","status":"<status>","reason":"<reason>"}` and sets the
/// list's lifetime to `REPLY_TTL_SECONDS` (default 60), so an abandoned list
/// disappears. `status` is the spec's per-message status: `sent`, `gone` or
/// `failed`; `reason` is empty except for `failed`: `credential_missing`,
/// `credential_rejected`, `provider_error`, or `expired` (the message's TTL passed
/// before it could be sent). A message retried after a 429/5xx answers only once,
/// with its final outcome; at-least-once delivery means a sender may in rare cases
/// (a worker crash between send and acknowledgement) see two objects for one `mid`.
public struct QueueMessage: Sendable, Equatable {
    public static let version = "1"

    public enum Field {
        public static let version = "v"
        public static let messageID = "mid"
        public static let subscription = "sub"
        public static let app = "app"
        public static let account = "acct"
        public static let credential = "cred"
        public static let topic = "topic"
        public static let token = "token"
        public static let sandbox = "sandbox"
        public static let title = "title"
        public static let body = "body"
        public static let ciphertext = "ct"
        public static let priority = "prio"
        public static let expiration = "exp"
        public static let collapseID = "collapse"
        public static let acceptedAt = "at"
        public static let quotaKey = "qk"
        public static let reply = "reply"
        public static let attempts = "n"
    }

    public var messageID: String
    public var subscriptionID: String
    public var appID: String
    public var accountID: String
    public var credentialID: String
    public var topic: String
    public var deviceToken: String
    public var sandbox: Bool
    public var alertTitle: String
    public var alertBody: String
    public var ciphertext: [UInt8]
    public var priority: Int
    /// UNIX seconds; 0 means "now or never".
    public var expiration: Int64
    public var collapseID: String?
    /// UNIX milliseconds.
    public var acceptedAt: Int64
    public var quotaKey: String
    /// The reply list to `RPUSH` the outcome to, if the sender waits for it.
    public var replyKey: String?
    /// Send attempts already made (0 for a fresh message).
    public var attempts: Int

    public init(
        messageID: String, subscriptionID: String, appID: String, accountID: String, credentialID: String,
        topic: String, deviceToken: String, sandbox: Bool, alertTitle: String, alertBody: String,
        ciphertext: [UInt8], priority: Int, expiration: Int64, collapseID: String?, acceptedAt: Int64,
        quotaKey: String, replyKey: String? = nil, attempts: Int = 0
    ) {
        self.messageID = messageID
        self.subscriptionID = subscriptionID
        self.appID = appID
        self.accountID = accountID
        self.credentialID = credentialID
        self.topic = topic
        self.deviceToken = deviceToken
        self.sandbox = sandbox
        self.alertTitle = alertTitle
        self.alertBody = alertBody
        self.ciphertext = ciphertext
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.acceptedAt = acceptedAt
        self.quotaKey = quotaKey
        self.replyKey = replyKey
        self.attempts = attempts
    }

    /// Reads an entry's flat `[field, value, field, value…]` list (as XRANGE /
    /// XREADGROUP return it). Unknown fields are ignored; a missing required one,
    /// or another format version, fails.
    public init(fields: [[UInt8]]) throws(QueueMessageError) {
        try self.init(entry: StreamEntryFields(fields))
    }

    /// `init(fields:)` from the one buffer the worker reads entries into.
    public init(entry fields: StreamEntryFields) throws(QueueMessageError) {
        // One pass, no dictionary and no String per field name: the worker decodes
        // every entry it reads. The last value of a repeated field wins.
        var slots = [Range<Int>?](repeating: nil, count: Self.slotNames.count)
        var index = 0
        while index + 1 < fields.count {
            if let slot = Self.slot(of: fields[index]) { slots[slot] = fields.range(of: index + 1) }
            index += 2
        }
        let bytes = fields.bytes
        func value(_ slot: Int) throws(QueueMessageError) -> ArraySlice<UInt8> {
            guard let range = slots[slot] else {
                throw QueueMessageError(field: Self.slotNames[slot], problem: "is missing")
            }
            return bytes[range]
        }
        func text(_ slot: Int) throws(QueueMessageError) -> String {
            String(decoding: try value(slot), as: UTF8.self)
        }
        func optionalText(_ slot: Int) -> String? { slots[slot].map { String(decoding: bytes[$0], as: UTF8.self) } }
        func integer(_ slot: Int) throws(QueueMessageError) -> Int64 {
            guard let number = Self.decimal(try value(slot)) else {
                throw QueueMessageError(field: Self.slotNames[slot], problem: "is not an integer")
            }
            return number
        }
        guard try value(0).elementsEqual(Self.version.utf8) else {
            throw QueueMessageError(field: Field.version, problem: "is not a known format version")
        }
        self.init(
            messageID: try text(1), subscriptionID: try text(2), appID: try text(3), accountID: try text(4),
            credentialID: try text(5), topic: try text(6), deviceToken: try text(7),
            sandbox: try value(8).elementsEqual(CollectionOfOne(UInt8(ascii: "1"))), alertTitle: try text(9),
            alertBody: try text(10), ciphertext: Array(try value(11)), priority: Int(try integer(12)),
            expiration: try integer(13), collapseID: optionalText(14), acceptedAt: try integer(15),
            quotaKey: try text(16), replyKey: optionalText(17), attempts: slots[18] == nil ? 0 : Int(try integer(18)))
    }

    /// Field names in the order `init(entry:)` keeps their values.
    private static let slotNames = [
        Field.version, Field.messageID, Field.subscription, Field.app, Field.account, Field.credential, Field.topic,
        Field.token, Field.sandbox, Field.title, Field.body, Field.ciphertext, Field.priority, Field.expiration,
        Field.collapseID, Field.acceptedAt, Field.quotaKey, Field.reply, Field.attempts,
    ]
    private static let slotBytes = slotNames.map { Array($0.utf8) }

    private static func slot(of name: ArraySlice<UInt8>) -> Int? {
        for (slot, candidate) in slotBytes.enumerated() where candidate.elementsEqual(name) { return slot }
        return nil
    }

    /// An optionally signed decimal integer, as `Int64(String)` reads it.
    private static func decimal(_ bytes: ArraySlice<UInt8>) -> Int64? {
        var digits = bytes
        let negative = digits.first == UInt8(ascii: "-")
        if negative || digits.first == UInt8(ascii: "+") { digits = digits.dropFirst() }
        guard !digits.isEmpty else { return nil }
        var value: Int64 = 0
        for byte in digits {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            // Past Int64 (e.g. -9223372036854775808): the exact reading, rarely needed.
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(Int64(digit))
            guard !overflow, !overflow2 else { return Int64(String(decoding: bytes, as: UTF8.self)) }
            value = sum
        }
        return negative ? -value : value
    }

    /// The flat field/value list for `XADD` (the order the script writes them in).
    public var fields: [[UInt8]] {
        var pairs: [(String, [UInt8])] = [
            (Field.version, Array(Self.version.utf8)), (Field.messageID, Array(messageID.utf8)),
            (Field.subscription, Array(subscriptionID.utf8)), (Field.app, Array(appID.utf8)),
            (Field.account, Array(accountID.utf8)), (Field.credential, Array(credentialID.utf8)),
            (Field.topic, Array(topic.utf8)), (Field.token, Array(deviceToken.utf8)),
            (Field.sandbox, sandbox ? [UInt8(ascii: "1")] : [UInt8(ascii: "0")]),
            (Field.title, Array(alertTitle.utf8)), (Field.body, Array(alertBody.utf8)),
            (Field.ciphertext, ciphertext), (Field.priority, Array(String(priority).utf8)),
            (Field.expiration, Array(String(expiration).utf8)),
        ]
        if let collapseID { pairs.append((Field.collapseID, Array(collapseID.utf8))) }
        pairs.append((Field.acceptedAt, Array(String(acceptedAt).utf8)))
        pairs.append((Field.quotaKey, Array(quotaKey.utf8)))
        if let replyKey { pairs.append((Field.reply, Array(replyKey.utf8))) }
        if attempts > 0 { pairs.append((Field.attempts, Array(String(attempts).utf8))) }
        return pairs.flatMap { [Array($0.0.utf8), $0.1] }
    }

    /// `production` or `sandbox`, as circuit keys name the APNs environment.
    public var environment: String { sandbox ? "sandbox" : "production" }
}

/// A stream entry that is not a `QueueMessage` of a known version.
public struct QueueMessageError: Error, Sendable, Equatable, CustomStringConvertible {
    public let field: String
    public let problem: String
    public init(field: String, problem: String) {
        self.field = field
        self.problem = problem
    }
    public var description: String { "queue message field \(field) \(problem)" }
}
