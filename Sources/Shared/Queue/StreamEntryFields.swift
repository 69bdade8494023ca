/// A stream entry's flat `[field, value, field, value…]` list in one buffer
/// (binary safe): one allocation per entry however many fields it has.
public struct StreamEntryFields: Sendable, Equatable {
    /// The items back to back.
    public private(set) var bytes: [UInt8] = []
    /// Where each item ends in `bytes`: the first `inlineItems` here, in the value
    /// itself (an entry has a dozen), so an entry's layout allocates nothing; any
    /// more (the former one-pair-per-property format) in `moreEnds`.
    private var firstEnds = InlineArray<16, UInt32>(repeating: 0)
    private var moreEnds: [Int] = []
    public private(set) var count = 0

    private static let inlineItems = 16  // firstEnds's size

    public init() {}

    public init(_ items: [[UInt8]]) {
        reserve(items: items.count, bytes: items.reduce(0) { $0 + $1.count })
        for item in items { append(item) }
    }

    public subscript(index: Int) -> ArraySlice<UInt8> {
        bytes[range(of: index)]
    }

    /// Where item `index` lies in `bytes`.
    public func range(of index: Int) -> Range<Int> {
        precondition(index >= 0 && index < count, "StreamEntryFields index out of range")
        return (index == 0 ? 0 : end(of: index - 1))..<end(of: index)
    }

    private func end(of index: Int) -> Int {
        index < Self.inlineItems ? Int(firstEnds[index]) : moreEnds[index - Self.inlineItems]
    }

    public mutating func reserve(items: Int, bytes byteCount: Int) {
        if items > Self.inlineItems { moreEnds.reserveCapacity(items - Self.inlineItems) }
        bytes.reserveCapacity(byteCount)
    }

    public mutating func append(_ item: some Collection<UInt8>) {
        bytes.append(contentsOf: item)
        itemAppended()
    }

    /// `append` for the bytes a reply reader hands over. Not generic, so callers in
    /// other modules get the copy specialized here rather than an element-by-element
    /// generic one (a visible share of reading a batch).
    public mutating func append(_ item: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: item)
        itemAppended()
    }

    private mutating func itemAppended() {
        if count < Self.inlineItems {
            firstEnds[count] = UInt32(bytes.count)
        } else {
            moreEnds.append(bytes.count)
        }
        count += 1
    }

    /// The items as separate arrays (script arguments).
    public var list: [[UInt8]] { (0..<count).map { Array(self[$0]) } }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.bytes == rhs.bytes && lhs.count == rhs.count
            && (0..<lhs.count).allSatisfy { lhs.end(of: $0) == rhs.end(of: $0) }
    }
}
