import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Shared

@Suite struct HTTPServerTests {
    /// Echoes what it received; bodies are limited to 8 KiB.
    struct EchoHandler: HTTPHandler {
        func maximumBodySize(for head: HTTPRequestHead) -> Int { 8192 }
        func bodyTooLarge(_ head: HTTPRequestHead) -> HTTPResponse {
            .json(413, #"{"error": "1004 Message too large"}"#)
        }
        func handle(_ request: HTTPRequest) async -> HTTPResponse {
            let query = request.head.query.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
            let summary =
                "\(request.method) \(request.path) ?\(query) x=\(request.headers["x-thing"] ?? "-") "
                + "peer=\(request.head.peerAddress) bytes=\(request.body.count)"
            var headers = HTTPHeaders()
            headers.add("X-Echo", "yes")
            return HTTPResponse(status: 201, headers: headers, body: Array(summary.utf8))
        }
    }

    func withServer(
        _ handler: some HTTPHandler, threads: Int = 2, _ body: (HTTPServer) async throws -> Void
    ) async throws {
        let (logger, _) = TestEnvironment.capturingLogger()
        let server = HTTPServer(
            configuration: .init(address: ListenAddress(host: "127.0.0.1", port: 0), threads: threads),
            handler: handler, logger: logger)
        try server.start()
        do {
            try await body(server)
        } catch {
            await server.shutdown(deadline: .seconds(1))
            throw error
        }
        await server.shutdown(deadline: .seconds(1))
    }

    @Test func deliversMethodPathQueryHeadersPeerAndBody() async throws {
        try await withServer(EchoHandler()) { server in
            let client = RawHTTPClient(port: server.port)
            let response = try await client.request(
                "POST", "/api/push/p/abc?x=1", headers: [("X-Thing", "value")], body: Array(repeating: 7, count: 100))
            #expect(response.status == 201)
            #expect(response.headers["x-echo"] == "yes")
            #expect(response.text == "POST /api/push/p/abc ?x=1 x=value peer=[127, 0, 0, 1] bytes=100")
        }
    }

    @Test func acceptsABodyExactlyAtTheLimit() async throws {
        try await withServer(EchoHandler()) { server in
            let response = try await RawHTTPClient(port: server.port).request(
                "POST", "/", body: Array(repeating: 1, count: 8192))
            #expect(response.status == 201)
            #expect(response.text.hasSuffix("bytes=8192"))
        }
    }

    @Test func answersOversizedDeclaredBodyWithTheHandlersError() async throws {
        try await withServer(EchoHandler()) { server in
            let response = try await RawHTTPClient(port: server.port).request(
                "POST", "/", body: Array(repeating: 1, count: 8193))
            #expect(response.status == 413)
            #expect(response.text == #"{"error": "1004 Message too large"}"#)
        }
    }

    @Test func answersOversizedChunkedBodyWithoutBufferingIt() async throws {
        try await withServer(EchoHandler()) { server in
            // No Content-Length: the limit is enforced as the chunks arrive.
            let chunk = Array(repeating: UInt8(ascii: "a"), count: 4096)
            var raw = Array(
                "POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
            for _ in 0..<3 { raw += Array("1000\r\n".utf8) + chunk + Array("\r\n".utf8) }
            raw += Array("0\r\n\r\n".utf8)
            let response = try RawHTTPClient.parse(try await RawHTTPClient(port: server.port).exchange(raw))
            #expect(response.status == 413)
        }
    }

    /// Every request waits until all of them are inside the handler at once. With
    /// one server thread this only completes if waiting handlers do not hold it.
    @Test func waitingHandlersDoNotHoldTheServerThreads() async throws {
        final class RendezvousHandler: HTTPHandler {
            let expected: Int
            let arrived = Atomic<Int>(0)
            init(expected: Int) { self.expected = expected }
            func handle(_ request: HTTPRequest) async -> HTTPResponse {
                arrived.add(1, ordering: .relaxed)
                for _ in 0..<1000 where arrived.load(ordering: .relaxed) < expected {
                    try? await Task.sleep(for: .milliseconds(10))
                }
                return .text(arrived.load(ordering: .relaxed) >= expected ? 200 : 504, "")
            }
        }
        try await withServer(RendezvousHandler(expected: 16), threads: 1) { server in
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<16 {
                    group.addTask { try await RawHTTPClient(port: server.port).request("GET", "/").status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses == Array(repeating: 200, count: 16))
        }
    }

    @Test func shutdownFinishesRequestsInProgressAndRefusesNewOnes() async throws {
        struct SlowHandler: HTTPHandler {
            let started = AsyncStream<Void>.makeStream()
            func handle(_ request: HTTPRequest) async -> HTTPResponse {
                started.continuation.yield()
                try? await Task.sleep(for: .milliseconds(300))
                return .text(200, "finished")
            }
        }
        let handler = SlowHandler()
        let (logger, _) = TestEnvironment.capturingLogger()
        let server = HTTPServer(
            configuration: .init(address: ListenAddress(host: "127.0.0.1", port: 0)), handler: handler, logger: logger)
        try server.start()
        let port = server.port
        let inProgress = Task { try await RawHTTPClient(port: port).request("GET", "/") }
        for await _ in handler.started.stream { break }
        await server.shutdown(deadline: .seconds(5))
        let response = try await inProgress.value
        #expect(response.status == 200)
        #expect(response.text == "finished")
        await #expect(throws: RawHTTPClient.Failure.self) {
            try await RawHTTPClient(port: port).request("GET", "/")
        }
    }

    @Test func refusesToStartOnAPortInUse() async throws {
        try await withServer(EchoHandler()) { server in
            let (logger, _) = TestEnvironment.capturingLogger()
            let second = HTTPServer(
                configuration: .init(address: ListenAddress(host: "127.0.0.1", port: server.port)),
                handler: EchoHandler(), logger: logger)
            #expect(throws: HTTPServerError.self) { try second.start() }
        }
    }
}
