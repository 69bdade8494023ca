import Shared

extension QueueMessage {
    /// `init(fields:)` for an entry read by the worker: the same reading of the same
    /// fields, from `EntryFields`' one buffer rather than an array per field. Returns
    /// nil for anything `init(fields:)` might refuse (a missing field, another
    /// version, an integer it would not read); the caller then asks `init(fields:)`,
    /// which names the problem (or reads an integer this one leaves to it).
    init?(entry fields: EntryFields) {
        let decoded: QueueMessage? = withUnsafeTemporaryAllocation(
            of: Range<Int>?.self, capacity: Self.entrySlotNames.count
        ) { slots in
            slots.initialize(repeating: nil)
            var index = 0
            while index + 1 < fields.count {
                if let slot = Self.entrySlot(of: fields[index]) {
                    let value = fields[index + 1]
                    slots[slot] = value.startIndex..<value.endIndex
                }
                index += 2
            }
            let bytes = fields.bytes
            func text(_ slot: Int) -> String? { slots[slot].map { String(decoding: bytes[$0], as: UTF8.self) } }
            func integer(_ slot: Int) -> Int64? { slots[slot].flatMap { Self.shortDecimal(bytes[$0]) } }
            guard let version = slots[0], bytes[version].elementsEqual(Self.version.utf8),
                let messageID = text(1), let subscriptionID = text(2), let appID = text(3),
                let accountID = text(4), let credentialID = text(5), let topic = text(6),
                let deviceToken = text(7), let sandbox = slots[8], let alertTitle = text(9),
                let alertBody = text(10), let ciphertext = slots[11], let priority = integer(12),
                let expiration = integer(13), let acceptedAt = integer(15), let quotaKey = text(16)
            else { return nil }
            var attempts: Int64 = 0
            if slots[18] != nil {
                guard let value = integer(18) else { return nil }
                attempts = value
            }
            return QueueMessage(
                messageID: messageID, subscriptionID: subscriptionID, appID: appID, accountID: accountID,
                credentialID: credentialID, topic: topic, deviceToken: deviceToken,
                sandbox: bytes[sandbox].elementsEqual([UInt8(ascii: "1")]), alertTitle: alertTitle,
                alertBody: alertBody, ciphertext: Array(bytes[ciphertext]), priority: Int(priority),
                expiration: expiration, collapseID: text(14), acceptedAt: acceptedAt, quotaKey: quotaKey,
                replyKey: text(17), attempts: Int(attempts))
        }
        guard let decoded else { return nil }
        self = decoded
    }

    /// Field names in slot order (`init(fields:)` keeps the same order).
    private static let entrySlotNames: [[UInt8]] = [
        Field.version, Field.messageID, Field.subscription, Field.app, Field.account, Field.credential, Field.topic,
        Field.token, Field.sandbox, Field.title, Field.body, Field.ciphertext, Field.priority, Field.expiration,
        Field.collapseID, Field.acceptedAt, Field.quotaKey, Field.reply, Field.attempts,
    ].map { Array($0.utf8) }

    private static func entrySlot(of name: ArraySlice<UInt8>) -> Int? {
        for (slot, candidate) in entrySlotNames.enumerated() where candidate.elementsEqual(name) { return slot }
        return nil
    }

    /// An optionally signed decimal of at most 18 digits (longer ones are left to `init(fields:)`).
    private static func shortDecimal(_ bytes: ArraySlice<UInt8>) -> Int64? {
        var digits = bytes
        let negative = digits.first == UInt8(ascii: "-")
        if negative || digits.first == UInt8(ascii: "+") { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value: Int64 = 0
        for byte in digits {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            value = value * 10 + Int64(digit)
        }
        return negative ? -value : value
    }
}
