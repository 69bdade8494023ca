import Foundation

/// Notifications sent together, written into one buffer: each one's device
/// token, topic, collapse id and payload are spans of `bytes`. A batch of any
/// size then costs two allocations instead of a string and a payload array per
/// notification, and the loop thread that sends it releases one buffer (made on
/// the caller's thread) rather than each notification's pieces.
///
/// Reads as a collection of `APNsNotification` values (made on demand: tests,
/// a retried notification). The client sends a batch's notifications straight
/// from the buffer.
public struct APNsNotificationBatch: Sendable, RandomAccessCollection {
    /// One notification: where its variable parts lie in `bytes`, and the rest.
    struct Item: Sendable {
        let deviceToken: Range<Int>
        let topic: Range<Int>
        let collapseID: Range<Int>?
        let payload: Range<Int>
        let pushType: APNsPushType
        let priority: APNsPriority
        let expiration: APNsExpiration?
        let apnsID: UUID?
    }

    private(set) var bytes: [UInt8] = []
    private(set) var items: [Item] = []

    public init() {}

    /// Empty, with room for `count` notifications of `bytes` bytes in all (tokens,
    /// topics, collapse ids and payloads), so appending never reallocates.
    public init(reservingCapacity count: Int, bytes: Int) {
        items.reserveCapacity(count)
        self.bytes.reserveCapacity(bytes)
    }

    public init(_ notifications: some Collection<APNsNotification>) {
        self.init(
            reservingCapacity: notifications.count,
            bytes: notifications.reduce(0) { $0 + $1.deviceToken.utf8.count + $1.topic.utf8.count + $1.payload.count })
        for notification in notifications { append(notification) }
    }

    public mutating func append(_ notification: APNsNotification) {
        let deviceToken = store(notification.deviceToken)
        let topic = store(notification.topic)
        let collapseID = notification.collapseID.map { store($0) }
        let start = bytes.count
        bytes.append(contentsOf: notification.payload)
        items.append(
            Item(
                deviceToken: deviceToken, topic: topic, collapseID: collapseID, payload: start..<bytes.count,
                pushType: notification.pushType, priority: notification.priority, expiration: notification.expiration,
                apnsID: notification.apnsID))
    }

    /// Appends a notification given as bytes (a queue message's, read in place) whose
    /// payload `writePayload` appends to the buffer it is handed: no String and no
    /// array of its own.
    public mutating func append(
        deviceToken: ArraySlice<UInt8>, topic: ArraySlice<UInt8>, pushType: APNsPushType, priority: APNsPriority,
        expiration: APNsExpiration?, collapseID: ArraySlice<UInt8>?, apnsID: UUID? = nil,
        payload writePayload: (inout [UInt8]) -> Void
    ) {
        let deviceToken = store(deviceToken)
        let topic = store(topic)
        let collapseID = collapseID.map { store($0) }
        let start = bytes.count
        writePayload(&bytes)
        items.append(
            Item(
                deviceToken: deviceToken, topic: topic, collapseID: collapseID, payload: start..<bytes.count,
                pushType: pushType, priority: priority, expiration: expiration, apnsID: apnsID))
    }

    private mutating func store(_ text: String) -> Range<Int> {
        let start = bytes.count
        let copied: Void? = text.utf8.withContiguousStorageIfAvailable { bytes.append(contentsOf: $0) }
        if copied == nil { bytes.append(contentsOf: text.utf8) }
        return start..<bytes.count
    }

    private mutating func store(_ value: ArraySlice<UInt8>) -> Range<Int> {
        let start = bytes.count
        bytes.append(contentsOf: value)
        return start..<bytes.count
    }

    // MARK: Collection

    public var startIndex: Int { 0 }
    public var endIndex: Int { items.count }

    /// The notification at `index`, as a value of its own.
    public subscript(index: Int) -> APNsNotification {
        let item = items[index]
        return APNsNotification(
            deviceToken: text(item.deviceToken), topic: text(item.topic), pushType: item.pushType,
            priority: item.priority, expiration: item.expiration, collapseID: item.collapseID.map(text),
            apnsID: item.apnsID, payload: Array(bytes[item.payload]))
    }

    private func text(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }

    // MARK: Sending

    /// Checks what would otherwise corrupt the request at `index`: the device token
    /// goes into the path, the others into header values. The error names the field,
    /// never its value.
    func validate(_ index: Int) throws(APNsClientError) {
        let item = items[index]
        let problem: String? = bytes.withUnsafeBufferPointer { bytes in
            Self.byteClasses.withUnsafeBufferPointer { classes in
                // Whether every byte in `range` is of class `wanted`: one table load per
                // byte and no branch (every notification is checked).
                func all(_ range: Range<Int>, are wanted: UInt8) -> Bool {
                    var found = wanted
                    for position in range { found &= classes[Int(bytes[position])] }
                    return found != 0
                }
                guard !item.deviceToken.isEmpty, item.deviceToken.count <= 200,
                    all(item.deviceToken, are: Self.hexDigit)
                else { return "the device token must be 1 to 200 hexadecimal characters" }
                guard !item.topic.isEmpty, all(item.topic, are: Self.headerSafe) else {
                    return "the topic must be non-empty visible ASCII"
                }
                let pushType = item.pushType.rawValue
                guard !pushType.isEmpty, pushType.utf8.allSatisfy({ classes[Int($0)] & Self.headerSafe != 0 }) else {
                    return "the push type must be non-empty visible ASCII"
                }
                if let collapseID = item.collapseID, !all(collapseID, are: Self.headerSafe) {
                    return "the collapse id must not contain control characters"
                }
                return nil
            }
        }
        if let problem { throw APNsClientError(.invalidRequest, problem) }
    }

    /// Adds the header fields of the request at `index` to `fields`; it must have
    /// passed `validate(_:)`.
    func appendRequestHeaders(
        of index: Int, to fields: inout HTTP2HeaderFields, authority: String, providerToken: String
    ) {
        let item = items[index]
        fields.append(":method", "POST")
        fields.append(":scheme", "https")
        fields.append(":authority", authority)
        fields.append(":path", prefix: "/3/device/", bytes: bytes[item.deviceToken])
        fields.append("authorization", prefix: "bearer ", providerToken)
        fields.append("apns-topic", prefix: "", bytes: bytes[item.topic])
        fields.append("apns-push-type", item.pushType.rawValue)
        fields.append("apns-priority") { DecimalText.append(Int64(item.priority.rawValue), to: &$0) }
        if let expiration = item.expiration {
            fields.append("apns-expiration") { DecimalText.append(expiration.seconds, to: &$0) }
        }
        if let collapseID = item.collapseID { fields.append("apns-collapse-id", prefix: "", bytes: bytes[collapseID]) }
        if let apnsID = item.apnsID { fields.append("apns-id") { Self.appendLowercase(apnsID, to: &$0) } }
    }

    /// The payload of the notification at `index`, where it lies (no copy).
    func payload(of index: Int) -> ArraySlice<UInt8> { bytes[items[index].payload] }

    /// `byteClasses` bits: a hex digit (0-9, a-f, A-F); safe in a header value (no
    /// control characters — CR, LF, NUL… — that could split or end a header).
    private static let hexDigit: UInt8 = 1
    private static let headerSafe: UInt8 = 2
    private static let byteClasses: [UInt8] = (0...255).map { byte in
        let isHex = (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
        return (isHex ? hexDigit : 0) | (byte >= 0x20 && byte != 0x7F ? headerSafe : 0)
    }

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
