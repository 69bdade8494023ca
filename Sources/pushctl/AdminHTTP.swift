import Foundation

/// One HTTP/1.1 request to the admin API on a connection of its own
/// (`Connection: close`), over TCP or TLS. pushctl's own client rather than
/// URLSession: that one needs libcurl at run time and keeps a core busy polling
/// while it waits for an answer.
struct AdminHTTPRequest {
    let method: String
    /// Path and query, already percent-encoded.
    let target: String
    let headers: [(name: String, value: String)]
    let body: [UInt8]

    func serialized(host: String) -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || ["POST", "PUT", "PATCH"].contains(method) { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + body
    }
}

struct AdminHTTPResponse: Equatable {
    let status: Int
    let body: [UInt8]
}

enum AdminHTTP {
    /// The most an answer may take: the admin API's largest pages are far smaller.
    static let responseLimit = 32 << 20

    /// Sends `request` to `url`'s host and reads the whole answer.
    static func exchange(_ request: AdminHTTPRequest, to url: URL, timeout: Duration) throws(ChannelError)
        -> AdminHTTPResponse
    {
        guard let host = url.host, let scheme = url.scheme else { throw ChannelError(reason: "no host in \(url)") }
        let secure = scheme == "https"
        let port = url.port ?? (secure ? 443 : 80)
        // An IPv6 literal comes back from `URL.host` without its brackets.
        let bareHost = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        let socket = try SocketChannel(host: bareHost, port: port, timeout: timeout)
        let channel: any ByteChannel
        do {
            channel = secure ? try TLSChannel(socket: socket, host: bareHost) : socket
        } catch {
            socket.close()
            throw error
        }
        defer { channel.close() }
        let hostField = bareHost.contains(":") ? "[\(bareHost)]" : bareHost
        try channel.write(request.serialized(host: url.port.map { "\(hostField):\($0)" } ?? hostField))
        var parser = HTTPResponseParser()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = try channel.read(into: &buffer)
            if count == 0 {
                guard let response = try parser.finish() else {
                    throw ChannelError(reason: "the connection closed mid-answer")
                }
                return response
            }
            if let response = try parser.append(buffer[..<count]) { return response }
            guard parser.received <= responseLimit else { throw ChannelError(reason: "the answer exceeds 32 MiB") }
        }
    }
}

/// Reads an HTTP/1.1 response as it arrives: framed by `Content-Length`, by chunks,
/// or by the end of the connection.
struct HTTPResponseParser {
    private var bytes: [UInt8] = []
    private var head: (status: Int, bodyStart: Int, framing: Framing)?

    private enum Framing {
        case length(Int)
        case chunked
        case untilClose
    }

    var received: Int { bytes.count }

    /// The response once it is complete, nil while more is expected.
    mutating func append(_ more: ArraySlice<UInt8>) throws(ChannelError) -> AdminHTTPResponse? {
        bytes += more
        if head == nil {
            guard let end = Self.find([13, 10, 13, 10], in: bytes[...]) else { return nil }
            head = try Self.parseHead(bytes[..<end], bodyStart: end + 4)
            // An interim answer (100 Continue) precedes the real one.
            if let status = head?.status, (100..<200).contains(status) {
                bytes.removeFirst(end + 4)
                head = nil
                return try append([])
            }
        }
        return try complete(atEnd: false)
    }

    /// The connection ended: the response if what arrived is one.
    mutating func finish() throws(ChannelError) -> AdminHTTPResponse? {
        head == nil ? nil : try complete(atEnd: true)
    }

    private func complete(atEnd: Bool) throws(ChannelError) -> AdminHTTPResponse? {
        guard let head else { return nil }
        let body = bytes[head.bodyStart...]
        switch head.framing {
        case .length(let length):
            return body.count >= length
                ? AdminHTTPResponse(status: head.status, body: Array(body.prefix(length))) : nil
        case .untilClose:
            return atEnd ? AdminHTTPResponse(status: head.status, body: Array(body)) : nil
        case .chunked:
            return try Self.dechunk(body).map { AdminHTTPResponse(status: head.status, body: $0) }
        }
    }

    private static func parseHead(_ head: ArraySlice<UInt8>, bodyStart: Int) throws(ChannelError)
        -> (status: Int, bodyStart: Int, framing: Framing)
    {
        let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]),
            (100..<600).contains(status)
        else { throw ChannelError(reason: "not an HTTP answer") }
        var framing = Framing.untilClose
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if name == "transfer-encoding", value.lowercased().hasSuffix("chunked") {
                framing = .chunked
            } else if name == "content-length", case .untilClose = framing {
                guard let length = Int(value), length >= 0 else { throw ChannelError(reason: "a bad Content-Length") }
                framing = .length(length)
            }
        }
        // No body, whatever the headers say.
        if status == 204 || status == 304 { framing = .length(0) }
        return (status, bodyStart, framing)
    }

    /// The body of a complete chunked encoding, nil while chunks are missing.
    private static func dechunk(_ encoded: ArraySlice<UInt8>) throws(ChannelError) -> [UInt8]? {
        var body: [UInt8] = []
        var rest = encoded
        while true {
            guard let lineEnd = find([13, 10], in: rest) else { return nil }
            let sizeText =
                String(decoding: rest[rest.startIndex..<lineEnd], as: UTF8.self)
                .split(separator: ";", maxSplits: 1).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            guard let size = Int(sizeText, radix: 16), size >= 0 else { throw ChannelError(reason: "a bad chunk") }
            let dataStart = lineEnd + 2
            if size == 0 { return body }  // trailers, if any, are not needed
            guard rest.endIndex - dataStart >= size + 2 else { return nil }
            body += rest[dataStart..<dataStart + size]
            rest = rest[(dataStart + size + 2)...]
        }
    }

    private static func find(_ pattern: [UInt8], in bytes: ArraySlice<UInt8>) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        var index = bytes.startIndex
        while index <= bytes.endIndex - pattern.count {
            if bytes[index..<index + pattern.count].elementsEqual(pattern) { return index }
            index += 1
        }
        return nil
    }
}
