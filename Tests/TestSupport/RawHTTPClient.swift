import Foundation

/// A deliberately plain HTTP/1.1 client over a blocking socket, so tests control
/// every byte (oversized bodies, lying Content-Length) and read exactly what the
/// server sent. Runs its blocking I/O off the cooperative pool.
package struct RawHTTPClient {
    package init(port: Int, host: String = "127.0.0.1") {
        self.port = port
        self.host = host
    }

    package struct Response {
        package let status: Int
        package let headers: [String: String]  // lower-cased names
        package let body: [UInt8]
        package var text: String { String(decoding: body, as: UTF8.self) }
    }

    package struct Failure: Error, CustomStringConvertible {
        package let description: String
        package init(description: String) { self.description = description }
    }

    package let port: Int
    package var host = "127.0.0.1"

    package func request(
        _ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8] = [],
        sendContentLength: Bool = true
    ) async throws -> Response {
        // An IPv6 address is bracketed in Host, as in a URL (RFC 9112 §3.2).
        let hostField = host.contains(":") ? "[\(host)]:\(port)" : host
        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(hostField)\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if sendContentLength { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        let bytes = Array(head.utf8) + body
        let raw = try await exchange(bytes)
        return try Self.parse(raw)
    }

    /// Sends `bytes` and reads until the server closes the connection.
    package func exchange(_ bytes: [UInt8]) async throws -> [UInt8] {
        let (host, port) = (self.host, self.port)
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { try Self.blockingExchange(host: host, port: port, bytes: bytes) })
            }
        }
    }

    private static func blockingExchange(host: String, port: Int, bytes: [UInt8]) throws -> [UInt8] {
        let fd = try ClientSocket.connect(host: host, port: port)
        defer { close(fd) }
        ClientSocket.send(bytes, on: fd)  // the server may answer and close before reading everything
        return ClientSocket.receiveAll(on: fd)
    }

    package static func parse(_ raw: [UInt8]) throws -> Response {
        guard let split = raw.firstRange(of: Array("\r\n\r\n".utf8)) else {
            throw Failure(description: "no complete response head in \(raw.count) bytes")
        }
        let lines = String(decoding: raw[..<split.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw Failure(description: "bad status line \(lines[0])")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        return Response(status: status, headers: headers, body: Array(raw[split.upperBound...]))
    }
}
