import Foundation

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
    /// `Authorization` twice: not a list field (RFC 9110 §5.3), and which one counts is
    /// a guess (a proxy keeping the last would see another caller). 400.
    case repeatedAuthorization
    /// `Transfer-Encoding` in an HTTP/1.0 request: RFC 9112 §6.1 has its framing
    /// treated as faulty (an HTTP/1.0 hop would not see the body) and the connection
    /// closed. 400.
    case transferCodingInHTTP10

    public var status: Int {
        switch self {
        case .targetTooLong: 414
        case .fieldsTooLarge: 431
        case .missingHost, .contentLengthWithTransferEncoding, .conflictingContentLengths, .malformedField,
            .invalidHost, .transferCodingInHTTP10, .repeatedAuthorization:
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
        case .repeatedAuthorization: "Authorization header given twice"
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
        case .targetTooLong, .fieldsTooLarge, .missingHost, .invalidHost, .repeatedAuthorization: false
        }
    }
}

/// The checks of a request's head before its handler sees it (`HTTPHeadRejection`):
/// what libmicrohttpd reads leniently, or cannot frame, is refused here.
extension HTTPRequestHead {
    /// Why the head of a request in HTTP `version` is refused, if it is: over `limit`
    /// (`HTTPServer.Configuration.headerLimit`), or taking more than two thirds of the
    /// connection's `memoryLimit` (many small fields: libmicrohttpd would have too
    /// little left to write any answer, and closes the connection unanswered), HTTP/1.1
    /// without `Host`, a second or malformed `Host`, `Authorization` given twice, a
    /// field libmicrohttpd reads leniently, or a body framed in a way libmicrohttpd
    /// cannot or should not read.
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
        var (hosts, authorizations) = (0, 0)
        for (name, value) in headers {
            if name.caseInsensitiveEquals("Host") {
                hosts += 1
                if hosts > 1 || !Self.isHost(value) { return .invalidHost }
            } else if name.caseInsensitiveEquals("Authorization") {
                authorizations += 1
                if authorizations > 1 { return .repeatedAuthorization }
            }
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
    private static func isTokenByte(_ byte: UInt8) -> Bool { tokenBytes.contains(byte) }
    private static let tokenBytes = ASCIISet(alphanumericsAnd: "!#$%&'*+-.^_`|~")

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
    /// authority). `uri-host` is an IP literal (`[...]`), or a reg-name or IPv4 address
    /// (RFC 3986's characters: no space, `/`, `@`, `?`, `#` or `:`); `port` is digits,
    /// possibly none.
    static func isHost(_ value: String) -> Bool {
        var rest = Substring(value)
        if rest.utf8.first == UInt8(ascii: "[") {
            guard let close = rest.firstIndex(of: "]") else { return false }
            guard isIPLiteral(rest[rest.index(after: rest.startIndex)..<close]) else { return false }
            rest = rest[rest.index(after: close)...]
        } else {
            let end = rest.firstIndex(of: ":") ?? rest.endIndex
            guard rest[..<end].utf8.allSatisfy(regNameBytes.contains) else { return false }
            rest = rest[end...]
        }
        guard let colon = rest.utf8.first else { return true }
        return colon == UInt8(ascii: ":") && rest.utf8.dropFirst().allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }
    private static let regNameBytes = ASCIISet(alphanumericsAnd: "-._~%!$&'()*+,;=")
    private static let ipFutureBytes = ASCIISet(alphanumericsAnd: "-._~!$&'()*+,;=:")
    private static let hexDigits = Set("0123456789abcdefABCDEF".utf8)

    /// The inside of RFC 3986's `IP-literal`: an IPv6 address, or `IPvFuture`
    /// (`v` hex digits `.` address characters).
    private static func isIPLiteral(_ literal: Substring) -> Bool {
        if let first = literal.utf8.first, first | 0x20 == UInt8(ascii: "v") {
            let rest = literal.utf8.dropFirst()
            guard let dot = rest.firstIndex(of: UInt8(ascii: ".")) else { return false }
            let version = rest[..<dot]
            let address = rest[rest.index(after: dot)...]
            return !version.isEmpty && version.allSatisfy(hexDigits.contains) && !address.isEmpty
                && address.allSatisfy(ipFutureBytes.contains)
        }
        var address = in6_addr()
        return String(literal).withCString { inet_pton(AF_INET6, $0, &address) } == 1
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
            // As lengths (`5` and `05` frame alike); what is no number libmicrohttpd refuses itself.
            if Self.contentLength(seen) != Self.contentLength(value) { return true }
        }
        return false
    }

    /// A `Content-Length` value as a length: one too large for `Int` (libmicrohttpd
    /// takes up to 2^64 − 1) is `Int.max`, over every limit; nil if it is no number.
    static func contentLength(_ value: String) -> Int? {
        let digits = value.utf8.drop { $0 == 0x20 || $0 == 0x09 }.prefix { $0 != 0x20 && $0 != 0x09 }
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        return Int(Substring(digits)) ?? .max
    }
}

/// A set of ASCII bytes as two 64-bit masks: one test per byte, for the checks every
/// request's head goes through.
struct ASCIISet: Sendable {
    private var low: UInt64 = 0
    private var high: UInt64 = 0

    /// Letters, digits and `others`.
    init(alphanumericsAnd others: String) {
        for byte in others.utf8 { insert(byte) }
        for range in [
            UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
        ] {
            for byte in range { insert(byte) }
        }
    }

    private mutating func insert(_ byte: UInt8) {
        precondition(byte < 128, "ASCII only")
        if byte < 64 { low |= 1 << UInt64(byte) } else { high |= 1 << UInt64(byte - 64) }
    }

    func contains(_ byte: UInt8) -> Bool {
        byte < 64 ? low >> UInt64(byte) & 1 == 1 : byte < 128 ? high >> UInt64(byte - 64) & 1 == 1 : false
    }
}
