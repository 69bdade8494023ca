/// Header fields in arrival order, looked up case-insensitively.
public struct HTTPHeaders: Sendable, Sequence {
    public private(set) var fields: [(name: String, value: String)] = []

    public init(_ fields: [(name: String, value: String)] = []) { self.fields = fields }

    public mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    /// The first value of `name`, ignoring case.
    public subscript(_ name: String) -> String? {
        fields.first { $0.name.caseInsensitiveEquals(name) }?.value
    }

    /// Every value of `name`, in order (e.g. several `X-Forwarded-For` lines).
    public func values(_ name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }
}

/// Why a request is answered from its head alone, before its handler sees it.
public enum HTTPHeadRejection: Sendable, Equatable {
    /// The path and query pass half the server's `headerLimit`.
    case targetTooLong
    /// The path, query and header fields pass the server's `headerLimit`, or would
    /// leave too little of the connection's memory for the answer.
    case fieldsTooLarge
    /// An HTTP/1.1 request without `Host`, which RFC 9112 (§3.2) has servers refuse.
    case missingHost
    /// Both `Content-Length` and `Transfer-Encoding`: where the body ends is ambiguous
    /// (request smuggling), so RFC 9112 (§6.3) has the connection closed after the answer.
    case contentLengthWithTransferEncoding
    /// `Content-Length` fields that disagree: libmicrohttpd would frame the body by the
    /// first and read the rest as another request (smuggling), so RFC 9112 (§6.3) has
    /// the connection closed after the answer. Repeats of one value are read as it.
    case conflictingContentLengths
    /// A `Transfer-Encoding` other than `chunked` alone: the body's end cannot be
    /// found, so the answer is 501 (RFC 9112 §6.1) and the connection is closed.
    case unsupportedTransferCoding
    /// A field name that is not a token (RFC 9110 §5.1: empty, or holding a space,
    /// which RFC 9112 §5.1 forbids before the colon, or another separator), a value
    /// holding CR or LF (RFC 9110 §5.5), or a name that merely starts like
    /// `Content-Length` or `Transfer-Encoding` (what libmicrohttpd makes of a folded
    /// line). libmicrohttpd reads such fields leniently: `Content-Length : 5` reached
    /// the handler as a field named `Content-Length ` and the body as the next request
    /// (smuggling). 400, and the connection is closed.
    case malformedField
    /// More than one `Host`, or one that is no `host[:port]` (RFC 9112 §3.2: 400).
    case invalidHost
    /// `Transfer-Encoding` in an HTTP/1.0 request: RFC 9112 §6.1 has its framing
    /// treated as faulty (an HTTP/1.0 hop would not see the body) and the connection
    /// closed. 400.
    case transferCodingInHTTP10

    public var status: Int {
        switch self {
        case .targetTooLong: 414
        case .fieldsTooLarge: 431
        case .missingHost, .contentLengthWithTransferEncoding, .conflictingContentLengths, .malformedField,
            .invalidHost, .transferCodingInHTTP10:
            400
        case .unsupportedTransferCoding: 501
        }
    }

    /// In English, for error bodies.
    public var reason: String {
        switch self {
        case .targetTooLong: "request target too long"
        case .fieldsTooLarge: "request header fields too large"
        case .missingHost: "Host header missing"
        case .contentLengthWithTransferEncoding: "Content-Length and Transfer-Encoding together"
        case .conflictingContentLengths: "conflicting Content-Length values"
        case .unsupportedTransferCoding: "transfer coding not supported"
        case .malformedField: "malformed header field"
        case .invalidHost: "invalid Host header"
        case .transferCodingInHTTP10: "Transfer-Encoding in an HTTP/1.0 request"
        }
    }

    /// The body cannot be framed: the answer goes out at once and the connection is
    /// closed, instead of reading a body whose end is unknown.
    public var closesConnection: Bool {
        switch self {
        case .contentLengthWithTransferEncoding, .conflictingContentLengths, .unsupportedTransferCoding,
            .malformedField, .transferCodingInHTTP10:
            true
        case .targetTooLong, .fieldsTooLarge, .missingHost, .invalidHost: false
        }
    }
}

/// What the server knows of a request before its body arrives; handlers use it to
/// choose the body limit.
public struct HTTPRequestHead: Sendable {
    /// What `HTTPServer.Configuration.headerLimit` counts: the bytes of the path and
    /// query (`target`) and of the whole head (`total`, header fields included), and
    /// how many fields and query arguments it has (`items`).
    struct Size {
        var target = 0
        var total = 0
        var items = 0

        /// What libmicrohttpd holds of the head in a connection's memory pool: its
        /// bytes as read, and a record of about 64 bytes per field and argument.
        var poolBytes: Int { total + items * 64 }
    }

    public let method: String
    /// The path without the query string, percent-decoded by libmicrohttpd (but `%00`,
    /// kept as its three characters: a NUL would end the path there), in origin form
    /// (an absolute-form target's scheme and authority dropped, `originForm(of:)`).
    public let path: String
    public let query: [(name: String, value: String)]
    public let headers: HTTPHeaders
    /// The socket peer's address (IPv4 4 bytes or IPv6 16 bytes); empty if unknown.
    public let peerAddress: [UInt8]

    var size: Size {
        var size = Size(target: path.utf8.count, items: query.count)
        for (name, value) in query { size.target += name.utf8.count + value.utf8.count + 2 }
        size.total = size.target
        for (name, value) in headers {
            size.total += name.utf8.count + value.utf8.count + 4
            size.items += 1
        }
        return size
    }

    /// Why the head of a request in HTTP `version` is refused, if it is: over `limit`
    /// (`HTTPServer.Configuration.headerLimit`), or taking more than two thirds of the
    /// connection's `memoryLimit` (many small fields: libmicrohttpd would have too
    /// little left to write any answer, and closes the connection unanswered), HTTP/1.1
    /// without `Host`, or a body framed in a way libmicrohttpd cannot or should not read.
    func rejection(limit: Int, memoryLimit: Int, version: String) -> HTTPHeadRejection? {
        // Framing first: a refusal for size keeps the connection, so a head both too
        // large and ambiguously framed must be refused for its framing (and closed).
        let codings = headers.values("Transfer-Encoding")
        if !codings.isEmpty {
            if headers["Content-Length"] != nil { return .contentLengthWithTransferEncoding }
            if version == "HTTP/1.0" { return .transferCodingInHTTP10 }
            // Compared as libmicrohttpd frames it: `chunked ` (a trailing space) is not.
            if codings.count > 1 || !codings[0].caseInsensitiveEquals("chunked") { return .unsupportedTransferCoding }
        }
        if hasConflictingContentLengths { return .conflictingContentLengths }
        if hasMalformedField { return .malformedField }
        let size = size
        if size.target > limit / 2 { return .targetTooLong }
        if size.total > limit || size.poolBytes > memoryLimit * 2 / 3 { return .fieldsTooLarge }
        var hosts = 0
        for (name, value) in headers where name.caseInsensitiveEquals("Host") {
            hosts += 1
            if hosts > 1 || !Self.isHost(value) { return .invalidHost }
        }
        if hosts == 0 && version.hasPrefix("HTTP/1.") && version != "HTTP/1.0" { return .missingHost }
        return nil
    }

    /// See `HTTPHeadRejection.malformedField`.
    private var hasMalformedField: Bool {
        for (name, value) in headers {
            if name.utf8.isEmpty || !name.utf8.allSatisfy(Self.isTokenByte) { return true }
            if value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A }) { return true }
            if name.utf8.count > 14 && Self.hasCaseInsensitivePrefix(name, "content-length") { return true }
            if name.utf8.count > 17 && Self.hasCaseInsensitivePrefix(name, "transfer-encoding") { return true }
        }
        return false
    }

    /// RFC 9110 §5.6.2 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    private static func hasCaseInsensitivePrefix(_ text: String, _ lowercasePrefix: String) -> Bool {
        var characters = text.utf8.makeIterator()
        for expected in lowercasePrefix.utf8 {
            guard let byte = characters.next() else { return false }
            let lowered = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            guard lowered == expected else { return false }
        }
        return true
    }

    /// RFC 9112 §3.2 `Host`: `uri-host [":" port]`, possibly empty (a target without
    /// authority). Checked by its characters: those of a reg-name, an IPv4 address or
    /// an IP literal (`[...]`) and the port; no space, `/`, `@`, `?` or `#`.
    static func isHost(_ value: String) -> Bool {
        value.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default: "-._~%!$&'()*+,;=:[]".utf8.contains(byte)
            }
        }
    }

    /// A request target in origin form: an absolute-form target (`http://host/path`,
    /// which RFC 9112 §3.2.2 has servers accept) loses its scheme and authority.
    public static func originForm(of target: String) -> String {
        guard target.utf8.first != UInt8(ascii: "/") else { return target }
        guard hasCaseInsensitivePrefix(target, "http://") || hasCaseInsensitivePrefix(target, "https://"),
            let schemeEnd = target.range(of: "://")
        else { return target }
        let authorityAndPath = target[schemeEnd.upperBound...]
        guard let slash = authorityAndPath.firstIndex(of: "/") else { return "/" }
        return String(authorityAndPath[slash...])
    }

    /// Whether `Content-Length` fields disagree. One pass, allocating only for a
    /// second field; a field holding a list (`5, 5`) libmicrohttpd refuses itself.
    private var hasConflictingContentLengths: Bool {
        var first: String?
        for (name, value) in headers where name.caseInsensitiveEquals("Content-Length") {
            guard let seen = first else {
                first = value
                continue
            }
            if seen.trimmingCharacters(in: .whitespaces) != value.trimmingCharacters(in: .whitespaces) { return true }
        }
        return false
    }
}

public struct HTTPRequest: Sendable {
    public let head: HTTPRequestHead
    public let body: [UInt8]

    public var method: String { head.method }
    public var path: String { head.path }
    public var headers: HTTPHeaders { head.headers }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response; `json` must already be serialized JSON text.
    public static func json(_ status: Int, _ json: String, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var headers = headers
        headers.add("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: headers, body: Array(json.utf8))
    }

    public static func text(_ status: Int, _ text: String, contentType: String = "text/plain; charset=utf-8")
        -> HTTPResponse
    {
        HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", contentType)]), body: Array(text.utf8))
    }
}

/// Answers requests. `handle` may suspend (on Redis, Postgres); the server's
/// threads are not blocked meanwhile.
public protocol HTTPHandler: Sendable {
    /// The largest body accepted for this request; a larger one is answered with
    /// `bodyTooLarge(_:)` without being buffered.
    func maximumBodySize(for head: HTTPRequestHead) -> Int
    /// The answer for a body over the limit (in the API's own error format).
    func bodyTooLarge(_ head: HTTPRequestHead) -> HTTPResponse
    /// The answer for a body over the limit when it needs I/O to decide (e.g. an
    /// earlier check that takes precedence over "too large"). The body has been
    /// discarded. By default `bodyTooLarge(_:)`.
    func handleOversized(_ head: HTTPRequestHead) async -> HTTPResponse
    func handle(_ request: HTTPRequest) async -> HTTPResponse
    /// Answers `request` by calling `respond` exactly once, from any thread. The
    /// server calls this one; by default it runs `handle(_:)` in a task. A handler
    /// overrides it for a route that can answer without a task (e.g. from the thread
    /// that delivers a Redis reply), which saves two thread hops per request. Called
    /// on one of the server's threads: it must not block.
    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void)
    /// The answer, in the API's own error format, for a request refused for its head
    /// (`rejection.status`): over the server's `headerLimit`, or without `Host`. The
    /// body, if any, is read and dropped. By default plain text.
    func rejected(_ head: HTTPRequestHead, _ rejection: HTTPHeadRejection) -> HTTPResponse
    /// The answer for a request still waiting for its handler when the server stops
    /// (past the shutdown deadline) or arriving while it stops. By default a plain 503.
    func unavailable(_ head: HTTPRequestHead) -> HTTPResponse
}

extension HTTPHandler {
    public func maximumBodySize(for head: HTTPRequestHead) -> Int { 64 * 1024 }
    public func bodyTooLarge(_ head: HTTPRequestHead) -> HTTPResponse { .text(413, "request body too large\n") }
    public func handleOversized(_ head: HTTPRequestHead) async -> HTTPResponse { bodyTooLarge(head) }
    public func unavailable(_ head: HTTPRequestHead) -> HTTPResponse { .text(503, "shutting down\n") }
    public func rejected(_ head: HTTPRequestHead, _ rejection: HTTPHeadRejection) -> HTTPResponse {
        .text(rejection.status, rejection.reason + "\n")
    }
    public func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        Task { respond(await handle(request)) }
    }
}

extension String {
    /// Equal ignoring case. Field names are ASCII, so that is compared byte by byte
    /// over the two strings' storage, without allocating; anything else falls back
    /// to Unicode lower-casing.
    package func caseInsensitiveEquals(_ other: String) -> Bool {
        guard utf8.count == other.utf8.count else { return false }
        let answer =
            utf8.withContiguousStorageIfAvailable { left in
                other.utf8.withContiguousStorageIfAvailable { right in Self.asciiCaseInsensitiveEquals(left, right) }
                    ?? nil
            } ?? nil
        if let answer { return answer }
        return lowercased() == other.lowercased()
    }

    /// Equal ignoring ASCII case; nil when a byte differs and either is not ASCII.
    private static func asciiCaseInsensitiveEquals(
        _ left: UnsafeBufferPointer<UInt8>, _ right: UnsafeBufferPointer<UInt8>
    ) -> Bool? {
        for index in left.indices {
            let (a, b) = (left[index], right[index])
            if a == b { continue }
            if a | b >= 0x80 { return nil }
            let lower = a | 0x20
            guard lower == b | 0x20, lower >= UInt8(ascii: "a"), lower <= UInt8(ascii: "z") else { return false }
        }
        return true
    }
}
