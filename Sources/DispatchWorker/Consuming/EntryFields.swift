/// A stream entry's flat `[field, value, field, value…]` list in one buffer
/// (binary safe): two allocations per entry however many fields it has.
struct EntryFields: Sendable, Equatable {
    /// The items back to back.
    private(set) var bytes: [UInt8] = []
    /// Where each item ends in `bytes`.
    private(set) var ends: [Int] = []

    init() {}

    init(_ items: [[UInt8]]) {
        bytes.reserveCapacity(items.reduce(0) { $0 + $1.count })
        ends.reserveCapacity(items.count)
        for item in items { append(item) }
    }

    var count: Int { ends.count }

    subscript(index: Int) -> ArraySlice<UInt8> {
        bytes[(index == 0 ? 0 : ends[index - 1])..<ends[index]]
    }

    mutating func reserve(items: Int, bytes byteCount: Int) {
        ends.reserveCapacity(items)
        bytes.reserveCapacity(byteCount)
    }

    mutating func append(_ item: some Collection<UInt8>) {
        bytes.append(contentsOf: item)
        ends.append(bytes.count)
    }

    /// The items as separate arrays (script arguments).
    var list: [[UInt8]] { (0..<count).map { Array(self[$0]) } }
}
