import Foundation
import TestSupport

/// A blocking HTTP/1.1 client that keeps one connection open for many requests
/// (Content-Length bodies only). Use it on its own thread (`onThread`), never on
/// the cooperative pool, which the server's handlers need.
final class KeepAliveClient {
    private let fd: Int32
    private var buffer: [UInt8] = []

    init(port: Int) throws {
        fd = try ClientSocket.connect(port: port, receiveTimeoutSeconds: 30)
    }

    func close() { _ = Foundation.close(fd) }

    func post(_ path: String, headers: [(String, String)], body: [UInt8]) throws -> RawHTTPClient.Response {
        var head = "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(body.count)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        guard ClientSocket.send(Array((head + "\r\n").utf8) + body, on: fd) else {
            throw RawHTTPClient.Failure(description: "send failed")
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
