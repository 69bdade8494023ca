import Shared

/// The header fields APNs reads from a request (`:method`, `:path`, `:authority`,
/// `authorization`, `apns-*`), found in one pass over the request's header list.
/// Their bytes are copied into one buffer a connection reuses, for the
/// validator's byte checks; the strings are kept too, so the topic, device token
/// and a valid `apns-id` are passed on as received without another copy.
struct APNsRequestHeaders {
    enum Name: Int, CaseIterable {
        case method, path, authority, authorization, topic, pushType, priority, expiration, collapseID, apnsID

        var text: StaticString {
            switch self {
            case .method: ":method"
            case .path: ":path"
            case .authority: ":authority"
            case .authorization: "authorization"
            case .topic: "apns-topic"
            case .pushType: "apns-push-type"
            case .priority: "apns-priority"
            case .expiration: "apns-expiration"
            case .collapseID: "apns-collapse-id"
            case .apnsID: "apns-id"
            }
        }

        /// The names by their length, the first thing compared (they mostly differ).
        private static let byLength: [[Name]] = {
            var table = [[Name]](repeating: [], count: allCases.map(\.text.utf8CodeUnitCount).max()! + 1)
            for name in allCases { table[name.text.utf8CodeUnitCount].append(name) }
            return table
        }()

        /// The name `bytes` spell, if APNs reads it.
        init?(_ bytes: UnsafeBufferPointer<UInt8>) {
            guard bytes.count < Self.byLength.count,
                let name = Self.byLength[bytes.count].first(where: { UTF8Bytes.equal(bytes, $0.text) })
            else { return nil }
            self = name
        }
    }

    private var bytes: [UInt8] = []
    /// Where each `Name`'s value is in `bytes` (by raw value).
    private var ranges: [Range<Int>?] = Array(repeating: nil, count: Name.allCases.count)
    /// Each `Name`'s value as received (by raw value).
    private var strings: [String?] = Array(repeating: nil, count: Name.allCases.count)
    /// One of the names was given more than once.
    private(set) var hasRepeatedField = false

    init() {
        bytes.reserveCapacity(512)
    }

    init(_ headers: [HTTP2Header]) {
        self.init()
        read(headers)
    }

    /// Takes the fields of a request's header list: for a name given twice, the last value.
    mutating func read(_ headers: [HTTP2Header]) {
        bytes.removeAll(keepingCapacity: true)
        for index in ranges.indices {
            ranges[index] = nil
            strings[index] = nil
        }
        hasRepeatedField = false
        // Fields read in place: iterating the array would copy (retain) each one.
        headers.withUnsafeBufferPointer { headers in
            for index in headers.indices {
                guard let name = UTF8Bytes.with(headers[index].name, { Name($0) }) else { continue }
                if ranges[name.rawValue] != nil { hasRepeatedField = true }
                let start = bytes.count
                UTF8Bytes.with(headers[index].value) { bytes.append(contentsOf: $0) }
                ranges[name.rawValue] = start..<bytes.count
                strings[name.rawValue] = headers[index].value
            }
        }
    }

    /// The field's value as received, or nil when it was not given.
    subscript(_ name: Name) -> String? { strings[name.rawValue] }

    /// Calls `body` with the values, valid only during the call.
    func withValues<Result>(_ body: (Values) -> Result) -> Result {
        bytes.withUnsafeBufferPointer { body(Values(bytes: $0, ranges: ranges)) }
    }

    /// The values of one request, pointing into its `APNsRequestHeaders`.
    struct Values {
        fileprivate let bytes: UnsafeBufferPointer<UInt8>
        fileprivate let ranges: [Range<Int>?]

        /// The field's value, or nil when it was not given.
        subscript(_ name: Name) -> UnsafeBufferPointer<UInt8>? {
            ranges[name.rawValue].map { UnsafeBufferPointer(rebasing: bytes[$0]) }
        }
    }
}
