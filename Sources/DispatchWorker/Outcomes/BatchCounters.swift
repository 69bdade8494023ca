import Shared

/// One daily counter as a field of a Redis counts hash: account, app, UTC day and
/// kind (`sent`, `failed`, `gone`), packed (`PackedFields`), so ids of any text stay
/// apart. A hash's own bookkeeping fields start with `#`; `counter(_:)` names no
/// counter for them.
enum CounterField {
    static func make(account: String, app: String, day: String, kind: DailyCounts.Kind) -> [UInt8] {
        var packed = PackedFields()
        packed.append(account)
        packed.append(app)
        packed.append(day)
        packed.append(kind.rawValue)
        return packed.bytes
    }

    /// The counter a field names, or nil when it names none (bookkeeping, or unreadable).
    static func counter(_ field: [UInt8]) -> (key: CountTransfer.Key, kind: DailyCounts.Kind)? {
        guard field.first != UInt8(ascii: "#") else { return nil }
        var reader = PackedFields.Reader(field[...])
        guard let account = reader.next(), let app = reader.next(), let day = reader.next(),
            let kind = reader.next().flatMap({ DailyCounts.Kind(rawValue: String(decoding: $0, as: UTF8.self)) }),
            reader.isAtEnd
        else { return nil }
        func text(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }
        return (CountTransfer.Key(account: text(account), app: text(app), day: text(day)), kind)
    }
}

/// The daily counters one acknowledgement write adds to, numbered from 1 in the
/// order first met, as `QueueScripts.acknowledge` reads them: their fields, each
/// plain entry's counts as records (counter number, messages; big-endian 32-bit
/// each), and each other message's counter number (0: it counts nothing).
/// Consecutive messages of one account and app (the usual case) share one lookup,
/// and their account and app become strings once per run, not per message.
struct BatchCounters {
    private(set) var fields: [[UInt8]] = []
    /// The plain entries' records, one after the other; `plainRecords(_:)` gives each entry's.
    private var records: [UInt8] = []
    private var recordEnds: [Int] = []
    private var numbers: [CounterKey: Int] = [:]
    private let day: String
    /// The last run's message, and its counters' numbers by kind (0: not numbered yet).
    private var run: (message: QueueMessage, numbers: SIMD3<Int>)?

    private struct CounterKey: Hashable {
        let account: String
        let app: String
        let kind: DailyCounts.Kind
    }

    init(day: String) {
        self.day = day
    }

    /// Numbers the counters of a plain entry's messages (sent, all of them, as the
    /// entry is plain) and keeps its records.
    mutating func addPlain(_ items: [Acknowledgement.Item]) {
        var start = 0
        while start < items.count {
            let (message, kind) = (items[start].delivery.message, items[start].tally)
            var end = start + 1
            while end < items.count && items[end].tally == kind
                && items[end].delivery.message.hasSameAccountAndApp(as: message)
            {
                end += 1
            }
            if let kind {
                Self.appendBigEndian(UInt32(number(of: message, kind)), to: &records)
                Self.appendBigEndian(UInt32(end - start), to: &records)
            }
            start = end
        }
        recordEnds.append(records.count)
    }

    /// The records of the `index`th plain entry added.
    func plainRecords(_ index: Int) -> ArraySlice<UInt8> {
        records[(index == 0 ? 0 : recordEnds[index - 1])..<recordEnds[index]]
    }

    /// The number of the counter `item` adds to; 0 when it counts nothing (a retry, a discard).
    mutating func number(of item: Acknowledgement.Item) -> Int {
        guard let kind = item.tally else { return 0 }
        return number(of: item.delivery.message, kind)
    }

    private mutating func number(of message: QueueMessage, _ kind: DailyCounts.Kind) -> Int {
        if run.map({ !$0.message.hasSameAccountAndApp(as: message) }) ?? true { run = (message, .zero) }
        if let known = run?.numbers[kind.index], known > 0 { return known }
        let key = CounterKey(account: message.accountID, app: message.appID, kind: kind)
        let number: Int
        if let known = numbers[key] {
            number = known
        } else {
            fields.append(CounterField.make(account: key.account, app: key.app, day: day, kind: kind))
            number = fields.count
            numbers[key] = number
        }
        run?.numbers[kind.index] = number
        return number
    }

    private static func appendBigEndian(_ value: UInt32, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }
}
