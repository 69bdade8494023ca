import Foundation

/// One push on the queue stream, with everything the dispatch worker needs to send
/// it without a Postgres query. Stored as a stream entry's field/value pairs
/// (binary safe: the ciphertext is raw bytes). The ingress's hot-path script writes
/// the entries (`HotPathScript`); `init(fields:)` / `init(entry:)` read them back.
///
/// **Format 2** (written since the compact layout): six fields, two of them packed
/// (`PackedFields`: length-prefixed items, in this order), so Redis stores, logs and
/// hands out a handful of values per push instead of nineteen pairs.
///
/// | field | value |
/// |---|---|
/// | `v` | format version, `2` |
/// | `s` | the subscription's part, packed as the subscription cache keeps it (`subscriptionPart`): app id, bundle id (`apns-topic`), device token (lower-case hex), `1` sandbox / `0` production, alert title, alert body |
/// | `m` | the message's part, packed by the ingress (`messagePart`): ciphertext, message id, subscription id, priority, expiration, accepted-at, collapse id (optional), reply list (optional) |
/// | `acct` | account id |
/// | `cred` | credential id chosen by the app at accept time |
/// | `qk` | the quota key the worker decrements (`DECR`) if the send fails |
/// | `n` | optional: send attempts so far (the worker's delayed retries set it; absent = 0) |
/// | `o` | optional: APNs's answer already known, when only writing it failed (the worker's retries set it: the message is not sent again, the outcome is written) |
///
/// **Format 3** (written by the hot-path script since the decision part): no `v`;
/// `s` and `m` as in format 2, and `d`, what the script decided, packed: account id,
/// credential id, quota key (the same values as format 2's `acct`, `cred`, `qk`; the
/// script packs them once per app and run). Three values per push instead of six:
/// each one costs Redis an object, a listpack insert and AOF text. An entry with
/// `d` and no `v` is format 3. `fields` still writes format 2, which stays readable.
///
/// **Format 4** (written by the hot-path script since batch entries): one entry
/// holds every push one script run queued: `v` `4`, then per message `s`, `m` and
/// `d` as in format 3, in that order. Redis then pays its cost per entry (the `XADD`,
/// and the worker's `XREADGROUP`, `XACK` and `XDEL`) once per run instead of once per
/// push. `messages(in:)` reads every format; an entry of format 1–3 holds one message.
/// A worker acknowledges a format-4 entry once all its messages have their outcomes
/// (`PendingEntry`); a crash before that sends all of them again (at least once).
///
/// **Format 1** (the former layout, still read so entries in flight during an
/// upgrade are delivered): one pair per property, `v` `1`, `mid`, `sub`, `app`,
/// `acct`, `cred`, `topic`, `token`, `sandbox`, `title`, `body`, `ct`, `prio`,
/// `exp`, optional `collapse`, `at`, `qk`, optional `reply`, optional `n`.
///
/// The values: message id (22-char base64url, the tail of the `Location` URL);
/// `apns-priority` `10`, or `5` for Urgency low / very-low; `apns-expiration` in
/// UNIX seconds, `0` = deliver now or never (TTL 0); `apns-collapse-id` from the
/// Web Push `Topic` header; accepted-at in UNIX milliseconds; the ciphertext is the
/// aes128gcm body as received.
///
/// **Unknown versions.** A worker reads every version up to its own; an entry of a
/// version it does not know (written by a newer ingress) cannot be decoded, and is
/// moved to the dead-letter stream with all its fields (never lost, replayable). So
/// an upgrade that changes the format deploys the workers first, then the ingress
/// (a worker that reads formats up to 3 dead-letters format 4's entries).
///
/// **Reply lists** (App API sends that wait for their outcome). A sender that wants
/// the outcome puts a list key in `reply`, made with `RedisKeys.reply(_:)` (so it
/// carries the stream's hash tag), e.g. one per App API request, and waits on it with
/// `BLPOP`. When the message's outcome is recorded, in the same script run as the
/// entry's acknowledgement, the worker `RPUSH`es one JSON object
/// `{"mid":"<message id>","status":"<status>","reason":"<reason>"}` and sets the
/// list's lifetime to `REPLY_TTL_SECONDS` (default 60), so an abandoned list
/// disappears. `status` is the spec's per-message status: `sent`, `gone`, `failed`,
/// or `not_found` (a message that waited, whose subscription was deleted meanwhile);
/// `reason` is empty except for `failed`: `credential_missing`,
/// `credential_rejected`, `provider_error`, `push_disabled` (switched off while the
/// message waited), or `expired` (the message's TTL passed before it could be sent). A message retried after a 429/5xx answers only once,
/// with its final outcome; at-least-once delivery means a sender may in rare cases
/// (a worker crash between send and acknowledgement) see two objects for one `mid`.
public struct QueueMessage: Sendable, Equatable {
    /// The format writers write.
    public static let version = "2"
    /// The former one-pair-per-property format, still read.
    public static let legacyVersion = "1"
    /// Several messages per entry, as the hot-path script writes them.
    public static let batchVersion = "4"

    public enum Field {
        public static let version = "v"
        public static let subscriptionPart = "s"
        public static let messagePart = "m"
        public static let account = "acct"
        public static let credential = "cred"
        public static let quotaKey = "qk"
        /// Format 3: account, credential and quota key, packed.
        public static let decisionPart = "d"
        public static let attempts = "n"
        public static let knownOutcome = "o"
        // Format 1 only.
        public static let messageID = "mid"
        public static let subscription = "sub"
        public static let app = "app"
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
        public static let reply = "reply"
    }

    // Text and byte values live in one buffer, `storage`, found by their spans: a
    // message read from an entry shares the entry's own buffer (no copy), and a
    // value becomes a `String` only when it is asked for. The worker reads most
    // values as bytes (`ciphertextBytes`…) and never makes most of the strings.
    private var storage: [UInt8]
    private var spans: Spans

    public var messageID: String {
        get { text(spans.messageID) }
        set { spans.messageID = store(newValue.utf8) }
    }
    public var subscriptionID: String {
        get { text(spans.subscriptionID) }
        set { spans.subscriptionID = store(newValue.utf8) }
    }
    public var appID: String {
        get { text(spans.appID) }
        set { spans.appID = store(newValue.utf8) }
    }
    public var accountID: String {
        get { text(spans.accountID) }
        set { spans.accountID = store(newValue.utf8) }
    }
    public var credentialID: String {
        get { text(spans.credentialID) }
        set { spans.credentialID = store(newValue.utf8) }
    }
    public var topic: String {
        get { text(spans.topic) }
        set { spans.topic = store(newValue.utf8) }
    }
    public var deviceToken: String {
        get { text(spans.deviceToken) }
        set { spans.deviceToken = store(newValue.utf8) }
    }
    public var sandbox: Bool
    public var alertTitle: String {
        get { text(spans.alertTitle) }
        set { spans.alertTitle = store(newValue.utf8) }
    }
    public var alertBody: String {
        get { text(spans.alertBody) }
        set { spans.alertBody = store(newValue.utf8) }
    }
    public var ciphertext: [UInt8] {
        get { Array(ciphertextBytes) }
        set { spans.ciphertext = store(newValue) }
    }
    public var priority: Int
    /// UNIX seconds: the acceptance's whole second plus the push's TTL (so
    /// `expiration - acceptedAt / 1000` is the TTL); 0 means "now or never".
    public var expiration: Int64
    public var collapseID: String? {
        get { optionalText(spans.collapseID) }
        set { spans.collapseID = newValue.map { store($0.utf8) } }
    }
    /// UNIX milliseconds.
    public var acceptedAt: Int64
    /// When the push's TTL runs out (UNIX ms): `acceptedAt` plus the TTL, up to a
    /// second after `expiration`, whose whole second would leave a `TTL: 1` push
    /// accepted late in a second only milliseconds. nil for "now or never".
    /// (Wrapping arithmetic: an entry's numbers are never trusted to trap on.)
    public var ttlEnd: Int64? {
        expiration == 0 ? nil : acceptedAt &+ (expiration &- acceptedAt / 1000) &* 1000
    }
    public var quotaKey: String {
        get { text(spans.quotaKey) }
        set { spans.quotaKey = store(newValue.utf8) }
    }
    /// The reply list to `RPUSH` the outcome to, if the sender waits for it.
    public var replyKey: String? {
        get { optionalText(spans.replyKey) }
        set { spans.replyKey = newValue.map { store($0.utf8) } }
    }
    /// Send attempts already made (0 for a fresh message).
    public var attempts: Int
    /// APNs's answer to an earlier attempt, when only recording it failed: the
    /// worker's own text (`KnownOutcome`), opaque here.
    public var knownOutcome: String?

    // MARK: Values in place

    /// The ciphertext where it lies (no copy).
    public var ciphertextBytes: ArraySlice<UInt8> { storage[spans.ciphertext.range] }
    /// The alert title's UTF-8 bytes as stored (decoding them gives `alertTitle`).
    public var alertTitleBytes: ArraySlice<UInt8> { storage[spans.alertTitle.range] }
    /// The alert body's UTF-8 bytes as stored (decoding them gives `alertBody`).
    public var alertBodyBytes: ArraySlice<UInt8> { storage[spans.alertBody.range] }
    /// The device token's bytes as stored (decoding them gives `deviceToken`).
    public var deviceTokenBytes: ArraySlice<UInt8> { storage[spans.deviceToken.range] }
    /// The topic's bytes as stored (decoding them gives `topic`).
    public var topicBytes: ArraySlice<UInt8> { storage[spans.topic.range] }
    /// The collapse id's bytes as stored, if there is one.
    public var collapseIDBytes: ArraySlice<UInt8>? { spans.collapseID.map { storage[$0.range] } }
    /// The subscription id's bytes as stored (decoding them gives `subscriptionID`).
    public var subscriptionIDBytes: ArraySlice<UInt8> { storage[spans.subscriptionID.range] }
    /// Whether there is a reply list, without making its name.
    public var hasReplyKey: Bool { spans.replyKey != nil }
    /// Whether there is a collapse id (a Web Push `Topic`), without making it.
    public var hasCollapseID: Bool { spans.collapseID != nil }

    /// Whether both name the same credential (compared as bytes, no strings made).
    public func hasSameCredential(as other: QueueMessage) -> Bool {
        equalBytes(spans.credentialID, other, other.spans.credentialID)
    }

    /// Whether both belong to the same account and app (compared as bytes).
    public func hasSameAccountAndApp(as other: QueueMessage) -> Bool {
        equalBytes(spans.accountID, other, other.spans.accountID) && equalBytes(spans.appID, other, other.spans.appID)
    }

    /// Where a value lies in `storage`.
    private struct Span: Equatable {
        let start: UInt32
        let end: UInt32

        init(_ range: Range<Int>) {
            start = UInt32(range.lowerBound)
            end = UInt32(range.upperBound)
        }

        /// Where `value` lies in the buffer it is a slice of. (Not through `indices`,
        /// which the optimizer left generic here, at a visible cost per entry.)
        init(_ value: Bytes) {
            self.init(value.startIndex..<value.endIndex)
        }

        var range: Range<Int> { Int(start)..<Int(end) }
    }

    private struct Spans {
        var messageID, subscriptionID, appID, accountID, credentialID, topic, deviceToken: Span
        var alertTitle, alertBody, ciphertext, quotaKey: Span
        var collapseID, replyKey: Span?
    }

    private func text(_ span: Span) -> String {
        String(decoding: storage[span.range], as: UTF8.self)
    }

    private func optionalText(_ span: Span?) -> String? {
        span.map(text)
    }

    private func equalBytes(_ span: Span, _ other: QueueMessage, _ otherSpan: Span) -> Bool {
        let (range, otherRange) = (span.range, otherSpan.range)
        guard range.count == otherRange.count else { return false }
        guard !range.isEmpty else { return true }
        // memcmp through raw pointers: slicing the arrays would retain them, and
        // `elementsEqual` walks the bytes one iterator step at a time.
        return storage.withUnsafeBytes { bytes in
            other.storage.withUnsafeBytes { otherBytes in
                memcmp(
                    bytes.baseAddress! + range.lowerBound, otherBytes.baseAddress! + otherRange.lowerBound, range.count)
                    == 0
            }
        }
    }

    /// Appends a new value to `storage` (the old one stays, unused: values are set
    /// rarely, mostly by tests) and returns where it lies.
    private mutating func store(_ value: some Collection<UInt8>) -> Span {
        Self.append(value, to: &storage)
    }

    private static func append(_ value: some Collection<UInt8>, to storage: inout [UInt8]) -> Span {
        let start = storage.count
        storage.append(contentsOf: value)
        return Span(start..<storage.count)
    }

    public init(
        messageID: String, subscriptionID: String, appID: String, accountID: String, credentialID: String,
        topic: String, deviceToken: String, sandbox: Bool, alertTitle: String, alertBody: String,
        ciphertext: [UInt8], priority: Int, expiration: Int64, collapseID: String?, acceptedAt: Int64,
        quotaKey: String, replyKey: String? = nil, attempts: Int = 0, knownOutcome: String? = nil
    ) {
        var storage: [UInt8] = []
        func store(_ value: some Collection<UInt8>) -> Span { Self.append(value, to: &storage) }
        let spans = Spans(
            messageID: store(messageID.utf8), subscriptionID: store(subscriptionID.utf8), appID: store(appID.utf8),
            accountID: store(accountID.utf8), credentialID: store(credentialID.utf8), topic: store(topic.utf8),
            deviceToken: store(deviceToken.utf8), alertTitle: store(alertTitle.utf8),
            alertBody: store(alertBody.utf8), ciphertext: store(ciphertext), quotaKey: store(quotaKey.utf8),
            collapseID: collapseID.map { store($0.utf8) }, replyKey: replyKey.map { store($0.utf8) })
        self.init(
            storage: storage,
            decoded: Decoded(
                spans: spans, sandbox: sandbox, priority: priority, expiration: expiration, acceptedAt: acceptedAt,
                attempts: attempts, knownOutcome: knownOutcome))
    }

    /// Where the values lie in a buffer, and the ones kept as numbers.
    private struct Decoded {
        let spans: Spans
        let sandbox: Bool
        let priority: Int
        let expiration: Int64
        let acceptedAt: Int64
        let attempts: Int
        let knownOutcome: String?
    }

    private init(storage: [UInt8], decoded: Decoded) {
        self.storage = storage
        spans = decoded.spans
        sandbox = decoded.sandbox
        priority = decoded.priority
        expiration = decoded.expiration
        acceptedAt = decoded.acceptedAt
        attempts = decoded.attempts
        knownOutcome = decoded.knownOutcome
    }

    /// Equal when every value is (as the properties read them: texts as strings).
    public static func == (lhs: QueueMessage, rhs: QueueMessage) -> Bool {
        lhs.sandbox == rhs.sandbox && lhs.priority == rhs.priority && lhs.expiration == rhs.expiration
            && lhs.acceptedAt == rhs.acceptedAt && lhs.attempts == rhs.attempts && lhs.knownOutcome == rhs.knownOutcome
            && lhs.ciphertextBytes.elementsEqual(rhs.ciphertextBytes) && lhs.messageID == rhs.messageID
            && lhs.subscriptionID == rhs.subscriptionID && lhs.appID == rhs.appID && lhs.accountID == rhs.accountID
            && lhs.credentialID == rhs.credentialID && lhs.topic == rhs.topic && lhs.deviceToken == rhs.deviceToken
            && lhs.alertTitle == rhs.alertTitle && lhs.alertBody == rhs.alertBody && lhs.collapseID == rhs.collapseID
            && lhs.quotaKey == rhs.quotaKey && lhs.replyKey == rhs.replyKey
    }

    /// The subscription's part of a format-2 entry (`s`), built once per cache fill.
    public static func subscriptionPart(
        appID: String, topic: String, deviceToken: String, sandbox: Bool, alertTitle: String, alertBody: String
    ) -> [UInt8] {
        var part = PackedFields(capacity: 128 + alertTitle.utf8.count + alertBody.utf8.count)
        part.append(appID)
        part.append(topic)
        part.append(deviceToken)
        part.append(sandbox ? "1" : "0")
        part.append(alertTitle)
        part.append(alertBody)
        return part.bytes
    }

    /// The message's part of a format-2 entry (`m`), built by the ingress per push.
    /// The ciphertext comes first, where the hot-path script finds it to stash it.
    public static func messagePart(
        messageID: String, subscriptionID: String, priority: Int, expiration: Int64, acceptedAt: Int64,
        collapseID: String?, replyKey: String?, ciphertext: [UInt8]
    ) -> [UInt8] {
        var part = PackedFields(capacity: ciphertext.count + 160)
        part.append(ciphertext)
        part.append(messageID)
        part.append(subscriptionID)
        part.append(Int64(priority))
        part.append(expiration)
        part.append(acceptedAt)
        part.appendOptional(collapseID)
        part.appendOptional(replyKey)
        return part.bytes
    }

    /// Format 3's decision part (`d`), as the hot-path script packs it.
    public static func decisionPart(accountID: String, credentialID: String, quotaKey: String) -> [UInt8] {
        var part = PackedFields(capacity: 8 + accountID.utf8.count + credentialID.utf8.count + quotaKey.utf8.count)
        part.append(accountID)
        part.append(credentialID)
        part.append(quotaKey)
        return part.bytes
    }

    /// Reads an entry's flat `[field, value, field, value…]` list (as XRANGE /
    /// XREADGROUP return it). Unknown fields are ignored; a missing required one,
    /// or an unknown format version, fails.
    public init(fields: [[UInt8]]) throws(QueueMessageError) {
        try self.init(entry: StreamEntryFields(fields))
    }

    /// `init(fields:)` from the one buffer the worker reads entries into, which the
    /// message then shares.
    public init(entry fields: StreamEntryFields) throws(QueueMessageError) {
        let storage = fields.bytes
        // Read through a pointer: every slice of the array would retain and release it.
        let decoded = try storage.withUnsafeBufferPointer { bytes throws(QueueMessageError) in
            try Self.decode(fields, in: bytes)
        }
        self.init(storage: storage, decoded: decoded)
    }

    /// Every message of an entry, in order: the messages of a format-4 entry, or the
    /// one of an entry of format 1–3. They share the entry's buffer. An entry with a
    /// message that cannot be read fails as a whole.
    public static func messages(in fields: StreamEntryFields) throws(QueueMessageError) -> [QueueMessage] {
        let storage = fields.bytes
        let batch = storage.withUnsafeBufferPointer { bytes in
            fields.count >= 2 && bytes[fields.range(of: 0)].elementsEqual(Field.version.utf8)
                && bytes[fields.range(of: 1)].elementsEqual(batchVersion.utf8)
        }
        guard batch else { return [try QueueMessage(entry: fields)] }
        let decoded = try storage.withUnsafeBufferPointer { bytes throws(QueueMessageError) in
            try Self.decodeBatch(fields, in: bytes)
        }
        return decoded.map { QueueMessage(storage: storage, decoded: $0) }
    }

    /// Format 4's three fields per message, in order, and the slots their values fill.
    private static let batchFieldNames: [(slot: Int, name: UInt8)] = [
        (Slot.subscriptionPart, UInt8(ascii: "s")), (Slot.messagePart, UInt8(ascii: "m")),
        (Slot.decisionPart, UInt8(ascii: "d")),
    ]

    /// Format 4: `v` `4`, then `s`, `m`, `d` per message.
    private static func decodeBatch(_ fields: StreamEntryFields, in bytes: UnsafeBufferPointer<UInt8>)
        throws(QueueMessageError) -> [Decoded]
    {
        guard fields.count > 2, (fields.count - 2) % 6 == 0 else {
            throw QueueMessageError(field: Field.version, problem: "4 is not followed by s, m and d per message")
        }
        var messages: [Decoded] = []
        messages.reserveCapacity((fields.count - 2) / 6)
        var index = 2
        while index < fields.count {
            var slots = SlotValues.Slots(repeating: nil)
            for (offset, expected) in Self.batchFieldNames.enumerated() {
                let name = bytes[fields.range(of: index + 2 * offset)]
                guard name.count == 1, name[name.startIndex] == expected.name else {
                    throw QueueMessageError(
                        field: Field.version, problem: "4 is not followed by s, m and d per message")
                }
                slots[expected.slot] = fields.range(of: index + 2 * offset + 1)
            }
            // `d`, the third of the three: its value is item index + 5.
            messages.append(
                try decided(SlotValues(bytes: bytes, slots: slots), decisionPart: fields.range(of: index + 5)))
            index += 6
        }
        return messages
    }

    /// A value of an entry being decoded, indexed as its buffer is.
    private typealias Bytes = Slice<UnsafeBufferPointer<UInt8>>

    /// What decoding an entry finds in its buffer (`bytes`, the entry's).
    private static func decode(_ fields: StreamEntryFields, in bytes: UnsafeBufferPointer<UInt8>)
        throws(QueueMessageError) -> Decoded
    {
        // One pass, no dictionary and no String per field name: the worker decodes
        // every entry it reads. The last value of a repeated field wins.
        var slots = SlotValues.Slots(repeating: nil)
        assert(slots.count == Slot.names.count)
        var index = 0
        while index + 1 < fields.count {
            if let slot = Slot.of(bytes[fields.range(of: index)]) { slots[slot] = fields.range(of: index + 1) }
            index += 2
        }
        let entry = SlotValues(bytes: bytes, slots: slots)
        if slots[Slot.version] == nil, let decisionPart = slots[Slot.decisionPart] {
            return try decided(entry, decisionPart: decisionPart)
        }
        let version = try entry.value(Slot.version)
        if version.elementsEqual(Self.version.utf8) {
            return try packed(entry) { () throws(QueueMessageError) in
                Decided(
                    account: try entry.span(Slot.account), credential: try entry.span(Slot.credential),
                    quotaKey: try entry.span(Slot.quotaKey))
            }
        } else if version.elementsEqual(Self.legacyVersion.utf8) {
            return try legacy(entry)
        } else {
            throw QueueMessageError(field: Field.version, problem: "is not a known format version")
        }
    }

    /// Format 3 (and each message of format 4): `s`, `m` and the packed `d`.
    private static func decided(_ entry: SlotValues, decisionPart: Range<Int>) throws(QueueMessageError) -> Decoded {
        try packed(entry) { () throws(QueueMessageError) in
            var decision = PackedFields.Reader(entry.bytes[decisionPart])
            func span() throws(QueueMessageError) -> Span {
                guard let item = decision.next() else {
                    throw QueueMessageError(field: Field.decisionPart, problem: "is truncated")
                }
                return Span(item)
            }
            return Decided(account: try span(), credential: try span(), quotaKey: try span())
        }
    }

    /// What the hot-path script adds to the two parts: format 2's fields or format 3's `d`.
    private struct Decided {
        let account, credential, quotaKey: Span
    }

    /// Formats 2 and 3: the subscription's and the message's parts, then `decided`.
    private static func packed(
        _ entry: SlotValues, decided: () throws(QueueMessageError) -> Decided
    ) throws(QueueMessageError) -> Decoded {
        // The packed items are slices of the entry's buffer: their indices are spans of it.
        var subscription = PackedFields.Reader(try entry.value(Slot.subscriptionPart))
        var message = PackedFields.Reader(try entry.value(Slot.messagePart))
        func item(_ reader: inout PackedFields.Reader<Bytes>, _ field: String) throws(QueueMessageError) -> Bytes {
            guard let item = reader.next() else { throw QueueMessageError(field: field, problem: "is truncated") }
            return item
        }
        func span(_ reader: inout PackedFields.Reader<Bytes>, _ field: String) throws(QueueMessageError) -> Span {
            Span(try item(&reader, field))
        }
        func optionalSpan(_ reader: inout PackedFields.Reader<Bytes>, _ field: String) throws(QueueMessageError)
            -> Span?
        {
            guard let item = reader.nextOptional() else {
                throw QueueMessageError(field: field, problem: "is truncated")
            }
            return item.map(Span.init)
        }
        func integer(_ reader: inout PackedFields.Reader<Bytes>, _ field: String) throws(QueueMessageError) -> Int64 {
            guard let number = Self.decimal(try item(&reader, field)) else {
                throw QueueMessageError(field: field, problem: "holds a value that is not an integer")
            }
            return number
        }
        let (s, m) = (Field.subscriptionPart, Field.messagePart)
        let appID = try span(&subscription, s)
        let topic = try span(&subscription, s)
        let deviceToken = try span(&subscription, s)
        let sandbox = try item(&subscription, s).elementsEqual(CollectionOfOne(UInt8(ascii: "1")))
        let alertTitle = try span(&subscription, s)
        let alertBody = try span(&subscription, s)
        let ciphertext = try span(&message, m)
        let messageID = try span(&message, m)
        let subscriptionID = try span(&message, m)
        let priority = Int(try integer(&message, m))
        let expiration = try integer(&message, m)
        let acceptedAt = try integer(&message, m)
        let collapseID = try optionalSpan(&message, m)
        let replyKey = try optionalSpan(&message, m)
        let decision = try decided()
        let spans = Spans(
            messageID: messageID, subscriptionID: subscriptionID, appID: appID, accountID: decision.account,
            credentialID: decision.credential, topic: topic, deviceToken: deviceToken, alertTitle: alertTitle,
            alertBody: alertBody, ciphertext: ciphertext, quotaKey: decision.quotaKey, collapseID: collapseID,
            replyKey: replyKey)
        return Decoded(
            spans: spans, sandbox: sandbox, priority: priority, expiration: expiration, acceptedAt: acceptedAt,
            attempts: try entry.attempts(), knownOutcome: entry.text(Slot.knownOutcome))
    }

    private static func legacy(_ entry: SlotValues) throws(QueueMessageError) -> Decoded {
        let spans = Spans(
            messageID: try entry.span(Slot.messageID), subscriptionID: try entry.span(Slot.subscription),
            appID: try entry.span(Slot.app), accountID: try entry.span(Slot.account),
            credentialID: try entry.span(Slot.credential), topic: try entry.span(Slot.topic),
            deviceToken: try entry.span(Slot.token), alertTitle: try entry.span(Slot.title),
            alertBody: try entry.span(Slot.body), ciphertext: try entry.span(Slot.ciphertext),
            quotaKey: try entry.span(Slot.quotaKey), collapseID: entry.optionalSpan(Slot.collapseID),
            replyKey: entry.optionalSpan(Slot.reply))
        return Decoded(
            spans: spans, sandbox: try entry.value(Slot.sandbox).elementsEqual(CollectionOfOne(UInt8(ascii: "1"))),
            priority: Int(try entry.integer(Slot.priority)), expiration: try entry.integer(Slot.expiration),
            acceptedAt: try entry.integer(Slot.acceptedAt), attempts: try entry.attempts(),
            knownOutcome: entry.text(Slot.knownOutcome))
    }

    /// The field names `init(entry:)` looks for, by slot.
    private enum Slot {
        static let version = 0, subscriptionPart = 1, messagePart = 2, account = 3, credential = 4, quotaKey = 5
        static let attempts = 6, messageID = 7, subscription = 8, app = 9, topic = 10, token = 11, sandbox = 12
        static let title = 13, body = 14, ciphertext = 15, priority = 16, expiration = 17, collapseID = 18
        static let acceptedAt = 19, reply = 20, decisionPart = 21, knownOutcome = 22

        static let names = [
            Field.version, Field.subscriptionPart, Field.messagePart, Field.account, Field.credential,
            Field.quotaKey, Field.attempts, Field.messageID, Field.subscription, Field.app, Field.topic,
            Field.token, Field.sandbox, Field.title, Field.body, Field.ciphertext, Field.priority,
            Field.expiration, Field.collapseID, Field.acceptedAt, Field.reply, Field.decisionPart,
            Field.knownOutcome,
        ]
        private static let nameBytes = names.map { Array($0.utf8) }

        static func of(_ name: Bytes) -> Int? {
            // Formats 2 and 3's one-letter names without a search: every entry read has three.
            if name.count == 1 {
                switch name[name.startIndex] {
                case UInt8(ascii: "v"): return version
                case UInt8(ascii: "s"): return subscriptionPart
                case UInt8(ascii: "m"): return messagePart
                case UInt8(ascii: "n"): return attempts
                case UInt8(ascii: "d"): return decisionPart
                case UInt8(ascii: "o"): return knownOutcome
                default: return nil
                }
            }
            for (slot, candidate) in nameBytes.enumerated()
            where candidate.count == name.count && candidate.elementsEqual(name) {
                return slot
            }
            return nil
        }
    }

    /// An entry's values by slot.
    private struct SlotValues {
        /// One per `Slot.names` entry, on the stack: no allocation per entry decoded.
        typealias Slots = InlineArray<23, Range<Int>?>

        let bytes: UnsafeBufferPointer<UInt8>
        let slots: Slots

        func value(_ slot: Int) throws(QueueMessageError) -> Bytes {
            guard let range = slots[slot] else {
                throw QueueMessageError(field: Slot.names[slot], problem: "is missing")
            }
            return bytes[range]
        }

        func span(_ slot: Int) throws(QueueMessageError) -> Span {
            Span(try value(slot))
        }

        func optionalSpan(_ slot: Int) -> Span? {
            slots[slot].map(Span.init)
        }

        func integer(_ slot: Int) throws(QueueMessageError) -> Int64 {
            guard let number = QueueMessage.decimal(try value(slot)) else {
                throw QueueMessageError(field: Slot.names[slot], problem: "is not an integer")
            }
            return number
        }

        func text(_ slot: Int) -> String? {
            slots[slot].map { String(decoding: bytes[$0], as: UTF8.self) }
        }

        func attempts() throws(QueueMessageError) -> Int {
            slots[Slot.attempts] == nil ? 0 : Int(try integer(Slot.attempts))
        }
    }

    /// An optionally signed decimal integer, as `Int64(String)` reads it.
    private static func decimal(_ bytes: Bytes) -> Int64? {
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

    /// The flat field/value list for `XADD`, in format 2 (read like the script's format 3).
    public var fields: [[UInt8]] {
        var fields: [[UInt8]] = [Array(Field.version.utf8), Array(Self.version.utf8)] + packedParts
        fields += [
            Array(Field.account.utf8), Array(accountID.utf8), Array(Field.credential.utf8), Array(credentialID.utf8),
            Array(Field.quotaKey.utf8), Array(quotaKey.utf8),
        ]
        if attempts > 0 { fields += [Array(Field.attempts.utf8), Array(String(attempts).utf8)] }
        if let knownOutcome { fields += [Array(Field.knownOutcome.utf8), Array(knownOutcome.utf8)] }
        return fields
    }

    /// A format-4 entry's flat field/value list holding `messages`, as the hot-path
    /// script writes it (tests).
    public static func batchFields(_ messages: [QueueMessage]) -> [[UInt8]] {
        var fields = [Array(Field.version.utf8), Array(batchVersion.utf8)]
        for message in messages {
            fields += message.packedParts
            fields += [
                Array(Field.decisionPart.utf8),
                decisionPart(
                    accountID: message.accountID, credentialID: message.credentialID, quotaKey: message.quotaKey),
            ]
        }
        return fields
    }

    /// `s` and `m` with their packed values, as formats 2 to 4 carry them.
    private var packedParts: [[UInt8]] {
        [
            Array(Field.subscriptionPart.utf8),
            Self.subscriptionPart(
                appID: appID, topic: topic, deviceToken: deviceToken, sandbox: sandbox, alertTitle: alertTitle,
                alertBody: alertBody),
            Array(Field.messagePart.utf8),
            Self.messagePart(
                messageID: messageID, subscriptionID: subscriptionID, priority: priority, expiration: expiration,
                acceptedAt: acceptedAt, collapseID: collapseID, replyKey: replyKey, ciphertext: ciphertext),
        ]
    }

    /// The flat field/value list in format 1, as ingresses before format 2 wrote it
    /// (entries still in flight during an upgrade; tests).
    public var legacyFields: [[UInt8]] {
        var pairs: [(String, [UInt8])] = [
            (Field.version, Array(Self.legacyVersion.utf8)), (Field.messageID, Array(messageID.utf8)),
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
