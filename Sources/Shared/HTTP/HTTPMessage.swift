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
