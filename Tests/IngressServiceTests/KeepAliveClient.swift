import Foundation
import TestSupport

/// A blocking HTTP/1.1 client that keeps one connection open for many requests
/// (Content-Length bodies only). Use it on its own thread (`onThread`), never on
/// the cooperative pool, which the server's handlers need.
final class KeepAliveClient {
    private let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawHTTPClient.Failure(description: "socket failed") }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close()
            throw RawHTTPClient.Failure(description: "connect failed")
        }
    }

    func close() { _ = Foundation.close(fd) }

    func post(_ path: String, headers: [(String, String)], body: [UInt8]) throws -> RawHTTPClient.Response {
        var head = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(body.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        let bytes = Array((head + "\r\n").utf8) + body
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw RawHTTPClient.Failure(description: "send failed") }
            offset += sent
        }
        while true {
            if let end = buffer.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
                let length =
                    head.components(separatedBy: "\r\n").compactMap { line -> Int? in
                        let parts = line.split(separator: ":", maxSplits: 1)
                        guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                        return Int(parts[1].trimmingCharacters(in: .whitespaces))
                    }.first ?? 0
                if buffer.count >= end.upperBound + length {
                    let raw = Array(buffer[..<(end.upperBound + length)])
                    buffer.removeFirst(end.upperBound + length)
                    return try RawHTTPClient.parse(raw)
                }
            }
            var chunk = [UInt8](repeating: 0, count: 16384)
            let count = recv(fd, &chunk, chunk.count, 0)
            guard count > 0 else { throw RawHTTPClient.Failure(description: "connection closed") }
            buffer += chunk[0..<count]
        }
    }
}

/// Runs blocking work on a new thread.
func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}
