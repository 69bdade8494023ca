/// A stream entry's flat `[field, value, field, value…]` list in one buffer
/// (binary safe): two allocations per entry however many fields it has.
public struct StreamEntryFields: Sendable, Equatable {
    /// The items back to back.
    public private(set) var bytes: [UInt8] = []
    /// Where each item ends in `bytes`.
    private var ends: [Int] = []

    public init() {}

    public init(_ items: [[UInt8]]) {
        bytes.reserveCapacity(items.reduce(0) { $0 + $1.count })
        ends.reserveCapacity(items.count)
        for item in items { append(item) }
    }

    public var count: Int { ends.count }

    public subscript(index: Int) -> ArraySlice<UInt8> {
        bytes[range(of: index)]
    }

    /// Where item `index` lies in `bytes`.
    public func range(of index: Int) -> Range<Int> {
        (index == 0 ? 0 : ends[index - 1])..<ends[index]
    }

    public mutating func reserve(items: Int, bytes byteCount: Int) {
        ends.reserveCapacity(items)
        bytes.reserveCapacity(byteCount)
    }

    public mutating func append(_ item: some Collection<UInt8>) {
        bytes.append(contentsOf: item)
        ends.append(bytes.count)
    }

    /// `append` for the bytes a reply reader hands over. Not generic, so callers in
    /// other modules get the copy specialized here rather than an element-by-element
    /// generic one (a visible share of reading a batch).
    public mutating func append(_ item: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: item)
        ends.append(bytes.count)
    }

    /// The items as separate arrays (script arguments).
    public var list: [[UInt8]] { (0..<count).map { Array(self[$0]) } }
}
