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
        func rejected(_ head: HTTPRequestHead, _ rejection: HTTPHeadRejection) -> HTTPResponse {
            .json(rejection.status, #"{"error": "1001 Invalid parameters: \#(rejection.reason)"}"#)
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

    /// Who runs libmicrohttpd: its own threads, or an `EventLoop` of ours.
    enum Polling: Sendable, CustomTestStringConvertible {
        case threads(Int)
        case eventLoop

        var testDescription: String {
            switch self {
            case .threads(let count): "\(count) libmicrohttpd threads"
            case .eventLoop: "an event loop"
            }
        }
    }

    static let pollings: [Polling] = [.threads(2), .eventLoop]

    func withServer(
        _ handler: some HTTPHandler, polling: Polling = .threads(2),
        _ configure: (inout HTTPServer.Configuration) -> Void = { _ in }, _ body: (HTTPServer) async throws -> Void
    ) async throws {
        let (logger, _) = TestEnvironment.capturingLogger()
        var configuration = HTTPServer.Configuration(address: ListenAddress(host: "127.0.0.1", port: 0))
        configure(&configuration)
        let loop: EventLoop?
        switch polling {
        case .threads(let count):
            configuration.threads = count
            loop = nil
        case .eventLoop:
            loop = EventLoop(name: "http-server-test")
            configuration.eventLoop = loop
        }
        defer { loop?.shutdown() }
        let server = HTTPServer(configuration: configuration, handler: handler, logger: logger)
        try server.start()
        do {
            try await body(server)
        } catch {
            await server.shutdown(deadline: .seconds(1))
            throw error
        }
        await server.shutdown(deadline: .seconds(1))
    }

    /// A started server for a test that shuts it down itself, and its event loop when
    /// `polling` asks for one (the caller shuts that down, after the server).
    func startServer(_ handler: some HTTPHandler, polling: Polling) throws -> (server: HTTPServer, loop: EventLoop?) {
        let (logger, _) = TestEnvironment.capturingLogger()
        var configuration = HTTPServer.Configuration(address: ListenAddress(host: "127.0.0.1", port: 0))
        let loop: EventLoop? = if case .eventLoop = polling { EventLoop(name: "http-server-test") } else { nil }
        configuration.eventLoop = loop
        let server = HTTPServer(configuration: configuration, handler: handler, logger: logger)
        do {
            try server.start()
        } catch {
            loop?.shutdown()
            throw error
        }
        return (server, loop)
    }

    @Test(arguments: pollings) func deliversMethodPathQueryHeadersPeerAndBody(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let client = RawHTTPClient(port: server.port)
            let response = try await client.request(
                "POST", "/api/push/p/abc?x=1", headers: [("X-Thing", "value")], body: Array(repeating: 7, count: 100))
            #expect(response.status == 201)
            #expect(response.headers["x-echo"] == "yes")
            #expect(response.text == "POST /api/push/p/abc ?x=1 x=value peer=[127, 0, 0, 1] bytes=100")
        }
    }

    /// An IPv6 listen address binds (libmicrohttpd needs telling), dual stack: an IPv4
    /// client of `[::]` is seen with its IPv4 address.
    @Test(arguments: pollings) func listensOnIPv6AndSeesIPv4ClientsOfTheDualStackAsIPv4(polling: Polling) async throws {
        for host in ["::1", "::"] {
            let listen = { (configuration: inout HTTPServer.Configuration) in
                configuration.address = ListenAddress(host: host, port: 0)
            }
            try await withServer(EchoHandler(), polling: polling, listen) { server in
                let overIPv6 = try await RawHTTPClient(port: server.port, host: "::1").request("GET", "/")
                #expect(overIPv6.text.hasSuffix("peer=\(Array(repeating: UInt8(0), count: 15) + [1]) bytes=0"))
                guard host == "::" else { return }
                let overIPv4 = try await RawHTTPClient(port: server.port).request("GET", "/")
                #expect(overIPv4.text.hasSuffix("peer=[127, 0, 0, 1] bytes=0"))
            }
        }
    }

    @Test(arguments: pollings) func acceptsABodyExactlyAtTheLimit(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let response = try await RawHTTPClient(port: server.port).request(
                "POST", "/", body: Array(repeating: 1, count: 8192))
            #expect(response.status == 201)
            #expect(response.text.hasSuffix("bytes=8192"))
        }
    }

    @Test(arguments: pollings) func answersOversizedDeclaredBodyWithTheHandlersError(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let response = try await RawHTTPClient(port: server.port).request(
                "POST", "/", body: Array(repeating: 1, count: 8193))
            #expect(response.status == 413)
            #expect(response.text == #"{"error": "1004 Message too large"}"#)
        }
    }

    @Test(arguments: pollings) func answersOversizedChunkedBodyWithoutBufferingIt(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
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

    /// A head over the server's `headerLimit` (8 KiB) is answered by the handler, in
    /// its own format, not by libmicrohttpd's HTML: 414 for a long path and query,
    /// 431 for header fields; its body is dropped, and the connection serves on.
    @Test(arguments: pollings) func answersAnOversizedHeadWithTheHandlersError(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let client = RawHTTPClient(port: server.port)
            let within = try await client.request(
                "GET", "/", headers: [("X-Thing", String(repeating: "a", count: 7000))])
            #expect(within.status == 201)
            let fields = try await client.request(
                "POST", "/", headers: [("X-Big", String(repeating: "a", count: 9000))], body: [1, 2, 3])
            #expect(fields.status == 431)
            #expect(fields.text == #"{"error": "1001 Invalid parameters: request header fields too large"}"#)
            let target = try await client.request("GET", "/" + String(repeating: "p", count: 4200))
            #expect(target.status == 414)
            #expect(target.text == #"{"error": "1001 Invalid parameters: request target too long"}"#)
            let query = try await client.request("GET", "/?q=" + String(repeating: "q", count: 4200))
            #expect(query.status == 414)

            // On one kept-alive connection, the request after a refused one is served.
            let refused =
                "POST / HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 9000))\r\n"
                + "Content-Length: 3\r\n\r\nabc"
            let next = "GET /next HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            let both = String(decoding: try await client.exchange(Array((refused + next).utf8)), as: UTF8.self)
            #expect(both.hasPrefix("HTTP/1.1 431"))
            #expect(both.contains("GET /next ?"))
        }
    }

    /// Heads under `headerLimit` with many fields: libmicrohttpd keeps a record of each
    /// in the connection's memory, and one that left too little for the answer used to
    /// be closed unanswered (or answered by libmicrohttpd's HTML page). Every one now
    /// gets a whole answer: served, or refused 431 in the handler's format.
    @Test(arguments: pollings) func headsWithManyFieldsAreAnsweredInTheHandlersFormat(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let refusal = #"{"error": "1001 Invalid parameters: request header fields too large"}"#
            var statuses: Set<Int> = []
            for (count, length) in [(120, 50), (126, 50), (128, 50), (129, 50), (130, 50), (250, 1), (280, 1)] {
                for padding in stride(from: 1, to: 200, by: 40) {
                    let fields = (0..<count).map { "X-H\($0): \(String(repeating: "v", count: length))\r\n" }
                    let raw =
                        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                        + "\(String(repeating: "A", count: padding)): y\r\n\(fields.joined())\r\n"
                    let answer = try RawHTTPClient.parse(
                        try await RawHTTPClient(port: server.port).exchange(Array(raw.utf8)))
                    statuses.insert(answer.status)
                    if answer.status != 201 {
                        #expect(answer.status == 431)
                        #expect(answer.text == refusal)
                    }
                }
            }
            #expect(statuses == [201, 431])
        }
    }

    /// A head of 16 or 20 KB (within the connection's memory, over `headerLimit`) is
    /// answered at once. libmicrohttpd reads it over several runs that it asks for at
    /// once and that call no callback; the driver took them for the busy loop of a
    /// stuck chunked upload and put them off, up to a second each: such heads were
    /// answered 6 and 27 s late.
    @Test(arguments: pollings) func aLargeHeadIsAnsweredWithoutDelay(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            for size in [16_000, 20_000] {
                let fields = (0..<(size / 210)).map { "X-F\($0): \(String(repeating: "a", count: 200))\r\n" }
                let raw = "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\(fields.joined())\r\n"
                let started = ContinuousClock.now
                let answer = try RawHTTPClient.parse(
                    try await RawHTTPClient(port: server.port).exchange(Array(raw.utf8)))
                let took = ContinuousClock.now - started
                #expect(answer.status == 431)
                #expect(took < .seconds(3), "a \(size)-byte head answered after \(took)")
            }
        }
    }

    /// An HTTP/1.1 request without `Host` is refused (RFC 9112 §3.2) by the handler, in
    /// its format; HTTP/1.0 needs none.
    @Test(arguments: pollings) func refusesAnHTTP11RequestWithoutHost(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let client = RawHTTPClient(port: server.port)
            let missing = try RawHTTPClient.parse(
                try await client.exchange(Array("GET / HTTP/1.1\r\nConnection: close\r\n\r\n".utf8)))
            #expect(missing.status == 400)
            #expect(missing.text == #"{"error": "1001 Invalid parameters: Host header missing"}"#)
            let old = try RawHTTPClient.parse(try await client.exchange(Array("GET / HTTP/1.0\r\n\r\n".utf8)))
            #expect(old.status == 201)
        }
    }

    /// A body whose end is ambiguous (`Content-Length` with `Transfer-Encoding`, or
    /// `Content-Length`s that disagree: request-smuggling vectors) or unknown (a coding other than `chunked`) is answered
    /// at once, 400 or 501 in the handler's format, and the connection is closed: a
    /// request pipelined behind it is never read (RFC 9112 §6.1, §6.3).
    @Test(arguments: pollings) func refusesBodiesItCannotFrameAndClosesTheConnection(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let next = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
            for (framing, status, reason) in [
                (
                    "Content-Length: 5\r\nTransfer-Encoding: chunked", 400,
                    "Content-Length and Transfer-Encoding together"
                ),
                ("Transfer-Encoding: gzip, chunked", 501, "transfer coding not supported"),
                ("Transfer-Encoding: identity", 501, "transfer coding not supported"),
                ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", 501, "transfer coding not supported"),
                // libmicrohttpd frames by the first: the rest would be read as a request.
                ("Content-Length: 0\r\nContent-Length: 5", 400, "conflicting Content-Length values"),
                ("Content-Length: 5\r\ncontent-length: 0", 400, "conflicting Content-Length values"),
                // libmicrohttpd does not frame this one as chunked.
                ("Transfer-Encoding: chunked ", 501, "transfer coding not supported"),
                // Framing before size: a 431 would keep the connection.
                (
                    "X-Pad: \(String(repeating: "a", count: 8300))\r\nContent-Length: 5\r\nTransfer-Encoding: chunked",
                    400, "Content-Length and Transfer-Encoding together"
                ),
            ] {
                let request = "POST / HTTP/1.1\r\nHost: x\r\n\(framing)\r\n\r\n0\r\n\r\n" + next
                let received = try await RawHTTPClient(port: server.port).exchange(Array(request.utf8))
                let answer = try RawHTTPClient.parse(received)
                #expect(answer.status == status)
                #expect(answer.text == #"{"error": "1001 Invalid parameters: \#(reason)"}"#)
                let text = String(decoding: received, as: UTF8.self)
                #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer, then closed: \(framing)")
                #expect(!text.contains("GET /next"))
            }
            // HTTP/1.0 has no transfer codings (RFC 9112 §6.1): its framing is faulty.
            let old = "POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + next
            let oldReceived = try await RawHTTPClient(port: server.port).exchange(Array(old.utf8))
            #expect(try RawHTTPClient.parse(oldReceived).status == 400)
            #expect(!String(decoding: oldReceived, as: UTF8.self).contains("GET /next"))
            // `chunked` alone is read as before, in any case, after any spaces.
            for value in ["Chunked", "\tchunked", "   CHUNKED"] {
                let chunked =
                    "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\(value)\r\nConnection: close\r\n\r\n"
                    + "3\r\nabc\r\n0\r\n\r\n"
                let read = try RawHTTPClient.parse(
                    try await RawHTTPClient(port: server.port).exchange(Array(chunked.utf8)))
                #expect(read.status == 201, "\(value)")
                #expect(read.text.contains("bytes=3"))
            }
            // The same length repeated frames the body as that length.
            let repeated =
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc"
            let sameReceived = try await RawHTTPClient(port: server.port).exchange(Array(repeated.utf8))
            let same = try RawHTTPClient.parse(sameReceived)
            #expect(same.status == 201)
            #expect(same.text.contains("bytes=3"))
        }
    }

    /// Fields libmicrohttpd reads leniently are refused with 400 and the connection
    /// closed, so what a proxy in front framed as one request is never read as two
    /// here (RFC 9112 §5.1, §5.2; RFC 9110 §5.1, §5.5): whitespace before the colon
    /// (`Content-Length : 5` reached the handler as another field, the body as the next
    /// request), a folded line (libmicrohttpd glued it into the name), a name that is
    /// no token.
    @Test(arguments: pollings) func refusesMalformedFieldsAndClosesTheConnection(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let smuggled = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
            let length = smuggled.utf8.count
            for fields in [
                "Content-Length : \(length)", "Content-Length\t: \(length)", "Content-Length:\r\n \(length)",
                "Transfer-Encoding :chunked\r\nContent-Length: 0", "X(A): v\r\nContent-Length: \(length)",
                // Refused for framing, not size, when the head is also too large (a 431
                // keeps the connection: the smuggled request would run).
                "X-Pad: \(String(repeating: "a", count: 8300))\r\nContent-Length : \(length)",
            ] {
                let request = "POST / HTTP/1.1\r\nHost: x\r\n\(fields)\r\n\r\n" + smuggled
                let received = try await RawHTTPClient(port: server.port).exchange(Array(request.utf8))
                let answer = try RawHTTPClient.parse(received)
                #expect(answer.status == 400, "\(fields)")
                #expect(answer.text == #"{"error": "1001 Invalid parameters: malformed header field"}"#)
                let text = String(decoding: received, as: UTF8.self)
                #expect(text.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer, then closed: \(fields)")
            }
            // Well-formed fields of every token character pass.
            let fine = "GET / HTTP/1.1\r\nHost: x\r\nX-A!#$%&'*+.^_`|~9: v\r\nConnection: close\r\n\r\n"
            let passed = try await RawHTTPClient(port: server.port).exchange(Array(fine.utf8))
            #expect(try RawHTTPClient.parse(passed).status == 201)
        }
    }

    /// RFC 9112 §3.2: a second `Host`, or one that is no `host[:port]`, is a 400; an empty
    /// one is allowed. An HTTP/1.x request from 1.1 on needs one.
    @Test(arguments: pollings) func refusesAnInvalidOrRepeatedHost(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let invalidHost = "invalid Host header"
            for (hosts, status, reason) in [
                ("Host: a\r\nHost: b", 400, invalidHost), ("Host: a b", 400, invalidHost),
                ("Host: a/b@c", 400, invalidHost), ("Host: ", 201, ""), ("Host: [::1]:8080", 201, ""),
                ("Host: push.example.com:443", 201, ""), ("Host: x:", 201, ""), ("Host: 10.0.0.1:8080", 201, ""),
                ("Host: x:80:90", 400, invalidHost), ("Host: x:8a", 400, invalidHost),
                ("Host: [::1", 400, invalidHost), ("Host: []", 400, invalidHost), ("Host: [::1]x", 400, invalidHost),
                ("Host: ::1", 400, invalidHost), ("Host: [zz]", 400, invalidHost), ("Host: [1:2]", 400, invalidHost),
                ("Host: [v1.x:y]:80", 201, ""), ("Host: [v.x]", 400, invalidHost), ("Host: [::ffff:1.2.3.4]", 201, ""),
                // Not a list field: which of two counts would be a guess.
                (
                    "Host: x\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b", 400,
                    "Authorization header given twice"
                ),
            ] {
                let request = "GET / HTTP/1.1\r\n\(hosts)\r\nConnection: close\r\n\r\n"
                let answer = try RawHTTPClient.parse(
                    try await RawHTTPClient(port: server.port).exchange(Array(request.utf8)))
                #expect(answer.status == status, "\(hosts)")
                if status == 400 { #expect(answer.text.contains(reason), "\(hosts)") }
            }
        }
    }

    /// An absolute-form target is routed by its path (RFC 9112 §3.2.2); a `%00` in a path
    /// stays as it is instead of ending the path as a NUL.
    @Test(arguments: pollings) func routesAbsoluteFormAndKeepsAnEncodedNUL(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            for (target, path) in [
                ("http://x/echo/a?q=1", "/echo/a"), ("HTTPS://x:1", "/"), ("/p/a%00b%41", "/p/a%00bA"),
                ("/p/%2541", "/p/%41"),
            ] {
                let request = "GET \(target) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                let answer = try RawHTTPClient.parse(
                    try await RawHTTPClient(port: server.port).exchange(Array(request.utf8)))
                #expect(answer.text.hasPrefix("GET \(path) ?"), "\(target): \(answer.text)")
            }
        }
    }

    /// A client that asks before sending (`Expect: 100-continue`) a body declared over
    /// the limit is refused at once, not invited to send it.
    @Test(arguments: pollings) func refusesADeclaredOversizedBodyBeforeInvitingIt(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            // Lengths past Int's range too (libmicrohttpd takes up to 2^64 − 1).
            for declared in ["100000", "9223372036854775808", "18446744073709551614"] {
                let raw = Array(
                    "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: \(declared)\r\n\r\n".utf8)
                let received = try await RawHTTPClient(port: server.port).exchange(raw)
                let text = String(decoding: received, as: UTF8.self)
                #expect(!text.contains("100 Continue"), "\(declared)")
                #expect(try RawHTTPClient.parse(received).status == 413)
            }
            // Within the limit, the client is still invited to send.
            let small = Array(
                "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd"
                    .utf8)
            let answered = String(decoding: try await RawHTTPClient(port: server.port).exchange(small), as: UTF8.self)
            #expect(answered.hasPrefix("HTTP/1.1 100 Continue"))
            #expect(answered.contains("bytes=4"))
        }
    }

    /// A body far over the limit (past `oversizedBodyDrain`) is not read to its end:
    /// declared, it is answered 413 at its first bytes (libmicrohttpd asks the handler
    /// again only when some arrive) and the connection closed; streamed (chunked), its
    /// connection is closed unanswered once that much was dropped (libmicrohttpd takes
    /// no answer in the middle of a chunked body). A body a little over is still read
    /// first, then answered.
    @Test(arguments: pollings) func answersABodyFarOverTheLimitWithoutReadingIt(polling: Polling) async throws {
        let drain: (inout HTTPServer.Configuration) -> Void = { $0.oversizedBodyDrain = 16 * 1024 }
        try await withServer(EchoHandler(), polling: polling, drain) { server in
            let declared = try HeldConnection(port: server.port)
            declared.send(Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000\r\n\r\n".utf8))
            try await Task.sleep(for: .milliseconds(100))
            declared.send([UInt8](repeating: 0x61, count: 10))
            let declaredAnswer = try RawHTTPClient.parse(await declared.receiveAll())
            #expect(declaredAnswer.status == 413)
            #expect(declaredAnswer.headers["connection"]?.lowercased() == "close")

            let streamed = try HeldConnection(port: server.port)
            streamed.send(Array("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
            var refused = false
            for size in [9000, 17000, 10, 10, 10] where !refused {
                let chunk = Array((String(size, radix: 16) + "\r\n").utf8) + [UInt8](repeating: 0x61, count: size)
                refused = !streamed.send(chunk + Array("\r\n".utf8))
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(refused, "closed once 16 KiB past the limit were dropped")

            // Within the drain, the body is read and the connection kept.
            let near =
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n" + String(repeating: "a", count: 10000)
                + "GET /after HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            let received = try await RawHTTPClient(port: server.port).exchange(Array(near.utf8))
            let both = String(decoding: received, as: UTF8.self)
            #expect(both.hasPrefix("HTTP/1.1 413"))
            #expect(both.contains("GET /after"))
        }
    }

    /// A chunked body's first bytes reserve 4 KiB of the body memory, not a whole 64 KiB
    /// step: one small chunk on each of a few thousand connections must not fill it.
    @Test(arguments: pollings) func aChunkedBodyReservesInSmallSteps(polling: Polling) async throws {
        struct JSONSizedHandler: HTTPHandler {
            func maximumBodySize(for head: HTTPRequestHead) -> Int { 64 * 1024 }
            func bodyTooLarge(_ head: HTTPRequestHead) -> HTTPResponse { HTTPResponse(status: 413) }
            func handle(_ request: HTTPRequest) async -> HTTPResponse { HTTPResponse(status: 204) }
        }
        try await withServer(JSONSizedHandler(), polling: polling) { server in
            let upload = try HeldConnection(port: server.port)
            upload.send(Array("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n".utf8))
            upload.send([UInt8](repeating: 0x61, count: 16))
            #expect(try await Poll.until(timeout: .seconds(5)) { server.heldBodyBytes == 4096 })
            upload.close()
            #expect(try await Poll.until(timeout: .seconds(5)) { server.heldBodyBytes == 0 })
        }
    }

    /// `openConnections` follows the connections libmicrohttpd holds (for `/metrics`):
    /// kept-alive connections count until their clients close them. (Its own threads
    /// may notice a client's close in the middle of a head only at the connection
    /// timeout; between requests they notice it at once, as the event loop does.)
    @Test(arguments: pollings) func countsOpenConnections(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let clients = try (0..<3).map { _ in try HeldConnection(port: server.port) }
            for client in clients { client.send(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)) }
            let answered = try await Poll.until(timeout: .seconds(5)) {
                server.openConnections == 3 && server.inFlight.load(ordering: .relaxed) == 0
            }
            #expect(answered)
            for client in clients { client.close() }
            #expect(try await Poll.until(timeout: .seconds(5)) { server.openConnections == 0 })
        }
    }

    /// Every request waits until all of them are inside the handler at once. With
    /// one server thread this only completes if waiting handlers do not hold it.
    @Test(arguments: [Polling.threads(1), .eventLoop])
    func waitingHandlersDoNotHoldTheServerThreads(polling: Polling) async throws {
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
        try await withServer(RendezvousHandler(expected: 16), polling: polling) { server in
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

    /// A request still waiting for its handler at the shutdown deadline is handed back
    /// to libmicrohttpd before the stop (which aborts the process while a connection
    /// is suspended) with a 503, and the handler's late answer does not resume a
    /// connection the stop freed: the process carries on.
    @Test(arguments: pollings) func anAnswerAfterTheShutdownDeadlineIsDropped(polling: Polling) async throws {
        struct LateHandler: HTTPHandler {
            let started = AsyncStream<Void>.makeStream()
            let released = AsyncStream<Void>.makeStream()
            let answered = AsyncStream<Void>.makeStream()
            /// Answers only once the test releases it, after the server has stopped.
            func handle(_ request: HTTPRequest) async -> HTTPResponse {
                started.continuation.yield()
                for await _ in released.stream { break }
                defer { answered.continuation.yield() }
                return .text(200, "too late")
            }
        }
        let handler = LateHandler()
        let (server, loop) = try startServer(handler, polling: polling)
        defer { loop?.shutdown() }
        let port = server.port
        let cutOff = Task { try await RawHTTPClient(port: port).request("GET", "/") }
        for await _ in handler.started.stream { break }
        await server.shutdown(deadline: .milliseconds(20))
        #expect(server.suspended.isStopping)
        handler.released.continuation.yield()
        // Answered with the handler's `unavailable` (a plain 503 here), written before
        // the stop: never the late answer, nor a connection closed without one.
        #expect(try await cutOff.value.status == 503)
        for await _ in handler.answered.stream { break }
        try await Task.sleep(for: .milliseconds(50))
    }

    /// A keep-alive client whose request is in flight when the shutdown begins gets
    /// its answer with `Connection: close`, so it leaves instead of sending more on
    /// the draining server (which would then wait out its whole deadline).
    @Test(arguments: pollings) func answersDuringTheDrainCloseTheirConnection(polling: Polling) async throws {
        /// Answers once the test releases it, when the drain has begun.
        struct HeldHandler: HTTPHandler {
            let started = AsyncStream<Void>.makeStream()
            let released = AsyncStream<Void>.makeStream()
            func handle(_ request: HTTPRequest) async -> HTTPResponse {
                started.continuation.yield()
                for await _ in released.stream { break }
                return .text(200, "finished")
            }
        }
        let handler = HeldHandler()
        let (server, loop) = try startServer(handler, polling: polling)
        defer { loop?.shutdown() }
        let client = try HeldConnection(port: server.port)
        client.send(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        for await _ in handler.started.stream { break }
        let start = ContinuousClock.now
        async let answer = client.receiveAll()
        let shutdown = Task { await server.shutdown(deadline: .seconds(10)) }
        #expect(try await Poll.until(timeout: .seconds(10)) { server.isDraining })
        handler.released.continuation.yield()
        await shutdown.value
        let response = try RawHTTPClient.parse(await answer)
        #expect(response.status == 200)
        #expect(response.headers["connection"]?.lowercased() == "close")
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    /// A handler answering from the loop's own thread (as the Web Push route does from
    /// a Redis multiplexer sharing the loop) gets its response written, connection
    /// after connection and request after request on a kept-alive one.
    @Test func answersFromTheEventLoopsOwnThread() async throws {
        struct LoopHandler: HTTPHandler {
            let loop: EventLoop
            func handle(_ request: HTTPRequest) async -> HTTPResponse { .text(500, "not on the loop") }
            func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
                loop.execute { [loop] in respond(.text(loop.inEventLoop ? 200 : 500, "\(request.path)")) }
            }
        }
        let (logger, _) = TestEnvironment.capturingLogger()
        let loop = EventLoop(name: "http-server-test")
        defer { loop.shutdown() }
        var configuration = HTTPServer.Configuration(address: ListenAddress(host: "127.0.0.1", port: 0))
        configuration.eventLoop = loop
        let server = HTTPServer(configuration: configuration, handler: LoopHandler(loop: loop), logger: logger)
        try server.start()
        for index in 0..<20 {
            let response = try await RawHTTPClient(port: server.port).request("GET", "/\(index)")
            #expect(response.status == 200)
            #expect(response.text == "/\(index)")
        }
        // Pipelined on one connection: the requests after the first are already read
        // when it is answered, and no new event announces them.
        var pipelined: [UInt8] = []
        for index in 0..<3 { pipelined += Array("GET /k\(index) HTTP/1.1\r\nHost: x\r\n\r\n".utf8) }
        pipelined += Array("GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
        let raw = String(decoding: try await RawHTTPClient(port: server.port).exchange(pipelined), as: UTF8.self)
        #expect(raw.components(separatedBy: "HTTP/1.1 200").count == 5)
        #expect(raw.hasSuffix("/last"))
        await server.shutdown(deadline: .seconds(1))
    }

    /// A chunk-size line (here with an extension) longer than the connection's memory:
    /// libmicrohttpd 0.9.75 without threads can neither hand it over nor read more,
    /// and asks to run again at once, walking the connection each time, until the
    /// connection times out (some 30,000 runs a second, a core busy for the 30 s of
    /// its timeout). The driver puts off runs that do nothing and, seeing the busy
    /// loop, times out the uploads that delivered nothing for a second: the stuck one
    /// closes within seconds, even while other clients keep the daemon busy.
    @Test func aChunkSizeLineLongerThanTheConnectionsMemoryIsClosedWithoutSpinningTheLoop() async throws {
        let timeout: (inout HTTPServer.Configuration) -> Void = { $0.connectionTimeoutSeconds = 30 }
        try await withServer(EchoHandler(), polling: .eventLoop, timeout) { server in
            let driver = try #require(server.driver)
            // A chunked upload still sending, a chunk every 100 ms until the stuck one is
            // closed: not cut off. It keeps its pace on a thread of its own, from its
            // head on (a Task could wait its turn past the server's one-second
            // judgement while the other suites keep the test process busy), and the
            // stuck upload starts once it is under way.
            let slow = try HeldConnection(port: server.port)
            let slowHead = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            let pace = PacedUpload()
            Thread.detachNewThread {
                slow.send(Array(slowHead.utf8))
                repeat {
                    slow.send(Array("1\r\nz\r\n".utf8))
                    if pace.chunks.add(1, ordering: .sequentiallyConsistent).newValue == 1 { pace.started.signal() }
                    usleep(100_000)
                } while !pace.stop.load(ordering: .sequentiallyConsistent)
                pace.finished.signal()
            }
            await Self.wait(for: pace.started)
            let stuck = try HeldConnection(port: server.port)
            stuck.send(Array("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n64;x=".utf8))
            stuck.send(Array(repeating: UInt8(ascii: "a"), count: 40_000))
            let started = ContinuousClock.now
            func closed() async -> Duration {
                _ = await stuck.receiveAll()
                return ContinuousClock.now - started
            }
            async let closedAfter = closed()
            // Other clients meanwhile: their progress must not keep the busy loop going.
            for _ in 0..<20 {
                let response = try await RawHTTPClient(port: server.port).request("POST", "/", body: [1, 2, 3])
                #expect(response.status == 201)
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(await closedAfter < .seconds(8))  // not the 30 s timeout (nor the client's 15 s)
            pace.stop.store(true, ordering: .sequentiallyConsistent)
            await Self.wait(for: pace.finished)
            slow.send(Array("0\r\n\r\n".utf8))
            let answer = try RawHTTPClient.parse(await slow.receiveAll())
            #expect(answer.status == 201)
            #expect(answer.text.hasSuffix("bytes=\(pace.chunks.load(ordering: .sequentiallyConsistent))"))
            let before = try await driver.loop.submit { driver.runs }
            try await Task.sleep(for: .seconds(1))
            let runs = try await driver.loop.submit { driver.runs } - before
            #expect(runs < 50, "\(runs) runs in a second")
        }
    }

    /// While a busy loop is being ended, an upload whose client keeps sending but
    /// delivers no body for over a second (a chunk-size line sent a byte at a time) is
    /// given the short timeout, and answered; once its body is in, its connection has
    /// its own timeout back: a request two and a half seconds later on it is answered.
    @Test func aKeptAliveConnectionGetsItsTimeoutBackAfterABusyLoopShortenedIt() async throws {
        let timeout: (inout HTTPServer.Configuration) -> Void = { $0.connectionTimeoutSeconds = 30 }
        try await withServer(EchoHandler(), polling: .eventLoop, timeout) { server in
            let trickling = try HeldConnection(port: server.port)
            let head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;"
            let pace = PacedUpload()
            Thread.detachNewThread {
                trickling.send(Array(head.utf8))
                pace.started.signal()
                for _ in 0..<15 {  // 3 s of a chunk extension, a byte every 200 ms
                    trickling.send(Array("e".utf8))
                    usleep(200_000)
                }
                trickling.send(Array("\r\nabc\r\n0\r\n\r\n".utf8))
                pace.finished.signal()
            }
            await Self.wait(for: pace.started)
            let stuck = try HeldConnection(port: server.port)
            stuck.send(Array("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n64;x=".utf8))
            stuck.send(Array(repeating: UInt8(ascii: "a"), count: 40_000))
            #expect(await stuck.receiveAll().isEmpty, "the stuck one closed unanswered")
            await Self.wait(for: pace.finished)
            try await Task.sleep(for: .milliseconds(2500))
            trickling.send(
                Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nConnection: close\r\n\r\nabcd".utf8))
            let raw = String(decoding: await trickling.receiveAll(), as: UTF8.self)
            #expect(raw.components(separatedBy: "HTTP/1.1 201").count == 3, "both answered: \(raw)")
            #expect(raw.contains("bytes=3") && raw.contains("bytes=4"), "\(raw)")
        }
    }

    @Test(arguments: pollings) func refusesToStartOnAPortInUse(polling: Polling) async throws {
        try await withServer(EchoHandler(), polling: polling) { server in
            let (logger, _) = TestEnvironment.capturingLogger()
            let second = HTTPServer(
                configuration: .init(address: ListenAddress(host: "127.0.0.1", port: server.port)),
                handler: EchoHandler(), logger: logger)
            #expect(throws: HTTPServerError.self) { try second.start() }
        }
    }

    /// Bodies being received count against the server's `bodyMemoryLimit`, all
    /// connections together, by the memory they hold (a declared `Content-Length` is
    /// reserved at its first bytes): a slow upload holds its part, a request that would
    /// pass the limit is answered `unavailable` (503), and the memory comes back once
    /// the body is handed over (or its connection ends).
    @Test(arguments: pollings) func bodiesPastTheServersBodyMemoryAreAnswered503(polling: Polling) async throws {
        struct LargeEchoHandler: HTTPHandler {
            func maximumBodySize(for head: HTTPRequestHead) -> Int { 64 * 1024 }
            func handle(_ request: HTTPRequest) async -> HTTPResponse { .text(201, "bytes=\(request.body.count)") }
        }
        let limited: (inout HTTPServer.Configuration) -> Void = { $0.bodyMemoryLimit = 100_000 }
        try await withServer(LargeEchoHandler(), polling: polling, limited) { server in
            func bodyMemory() -> Int { server.bodyMemory.load(ordering: .relaxed) }
            let slow = try HeldConnection(port: server.port)
            slow.send(Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\nConnection: close\r\n\r\n".utf8))
            slow.send(Array(repeating: 1, count: 50_000))
            #expect(try await Poll.until(timeout: .seconds(10)) { bodyMemory() == 60_000 })

            let refused = try await RawHTTPClient(port: server.port).request(
                "POST", "/", body: Array(repeating: 2, count: 60_000))
            #expect(refused.status == 503)

            slow.send(Array(repeating: 1, count: 10_000))
            let answer = try RawHTTPClient.parse(await slow.receiveAll())
            #expect(answer.status == 201)
            #expect(answer.text == "bytes=60000")
            let accepted = try await RawHTTPClient(port: server.port).request(
                "POST", "/", body: Array(repeating: 3, count: 60_000))
            #expect(accepted.status == 201)
            #expect(try await Poll.until(timeout: .seconds(10)) { bodyMemory() == 0 })

            // A client that leaves in the middle of its body gives its part back.
            let leaving = try HeldConnection(port: server.port)
            leaving.send(Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n".utf8))
            leaving.send(Array(repeating: 1, count: 30_000))
            #expect(try await Poll.until(timeout: .seconds(10)) { bodyMemory() == 60_000 })
            leaving.close()
            #expect(try await Poll.until(timeout: .seconds(10)) { bodyMemory() == 0 })

            // Without a declared length (chunked), what the growing body holds: at least
            // what arrived, in steps of at least 64 KiB (here the whole limit).
            let chunked = try HeldConnection(port: server.port)
            chunked.send(Array("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
            chunked.send(Array("2710\r\n".utf8) + Array(repeating: 4, count: 10_000) + Array("\r\n".utf8))
            #expect(try await Poll.until(timeout: .seconds(10)) { bodyMemory() >= 10_000 })
            #expect(bodyMemory() <= 64 * 1024)  // at least one 64 KiB step, within the limit
            chunked.send(Array("0\r\n\r\n".utf8))
            #expect(try await Poll.until(timeout: .seconds(10)) { bodyMemory() == 0 })
            chunked.close()
        }
    }

    /// `connectionsPerIP`: past it, a peer's new connections are closed unanswered
    /// (for a server that clients reach without a proxy), and allowed again once one
    /// of its connections ends.
    @Test(arguments: pollings) func aPeersConnectionsPastThePerIPLimitAreClosed(polling: Polling) async throws {
        let capped: (inout HTTPServer.Configuration) -> Void = { $0.connectionsPerIP = 2 }
        try await withServer(EchoHandler(), polling: polling, capped) { server in
            let held = try (0..<2).map { _ in try HeldConnection(port: server.port) }
            for connection in held { connection.send(Array("POST / HTTP/1.1\r\nHost: x\r\n".utf8)) }
            let third = try HeldConnection(port: server.port)
            third.send(Array("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
            #expect(await third.receiveAll().isEmpty)
            held[0].close()
            #expect(
                try await Poll.until(timeout: .seconds(10)) {
                    (try? await RawHTTPClient(port: server.port).request("GET", "/"))?.status == 201
                })
        }
    }

    /// Bodies allowed past 64 KiB (the App API's) share half the body memory, so a
    /// flood of them leaves room for the small ones (Web Push); and a declared length
    /// alone reserves at most 64 KiB, so holding the budget takes sending the bytes.
    @Test func largeBodiesShareHalfTheBodyMemory() async throws {
        struct SizedHandler: HTTPHandler {
            func maximumBodySize(for head: HTTPRequestHead) -> Int { head.path == "/large" ? 1 << 20 : 64 * 1024 }
            func handle(_ request: HTTPRequest) async -> HTTPResponse { .text(201, "bytes=\(request.body.count)") }
        }
        let limited: (inout HTTPServer.Configuration) -> Void = { $0.bodyMemoryLimit = 200_000 }
        try await withServer(SizedHandler(), polling: .eventLoop, limited) { server in
            func largeBodyMemory() -> Int { server.largeBodyMemory.load(ordering: .relaxed) }
            let large = try HeldConnection(port: server.port)
            large.send(Array("POST /large HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n".utf8))
            large.send([1])
            #expect(try await Poll.until(timeout: .seconds(10)) { largeBodyMemory() == 64 * 1024 })
            // 64 KiB + 60,000 passes the large bodies' half (100,000).
            let secondLarge = try await RawHTTPClient(port: server.port).request(
                "POST", "/large", body: Array(repeating: 2, count: 60_000))
            #expect(secondLarge.status == 503)
            let small = try await RawHTTPClient(port: server.port).request(
                "POST", "/", body: Array(repeating: 3, count: 60_000))
            #expect(small.status == 201)
            large.close()
            #expect(try await Poll.until(timeout: .seconds(10)) { server.bodyMemory.load(ordering: .relaxed) == 0 })
            #expect(largeBodyMemory() == 0)
        }
    }

    /// A body that trickles in, never idle for the connection timeout, is cut off once
    /// it has taken `bodyTimeout`, and its memory given back.
    @Test(arguments: pollings) func aBodyStillArrivingAfterTheBodyTimeoutIsCutOff(polling: Polling) async throws {
        let quick: (inout HTTPServer.Configuration) -> Void = { $0.bodyTimeout = .seconds(1) }
        try await withServer(EchoHandler(), polling: polling, quick) { server in
            let slow = try HeldConnection(port: server.port)
            slow.send(Array("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n".utf8))
            slow.send(Array(repeating: 1, count: 10))
            #expect(try await Poll.until(timeout: .seconds(10)) { server.bodyMemory.load(ordering: .relaxed) == 100 })
            try await Task.sleep(for: .milliseconds(1500))
            slow.send(Array(repeating: 1, count: 10))
            #expect(await slow.receiveAll().isEmpty)  // closed, unanswered
            #expect(try await Poll.until(timeout: .seconds(10)) { server.bodyMemory.load(ordering: .relaxed) == 0 })
        }
    }

    /// libmicrohttpd's messages never carry a request's path (a push URL is a
    /// capability), and per-connection ones are told apart from server-level ones.
    @Test func libmicrohttpdMessagesLeaveThePathOutAndTellConnectionsFromTheServer() {
        let id = "AbCdEfGhIjKlMnOpQrStUv"
        let headers = "Failed to send the response headers for the request for `/api/push/p/\(id)'. Error: reset"
        #expect(
            HTTPServerLogText.redacted(headers)
                == "Failed to send the response headers for the request for `<path>'. Error: reset")
        #expect(
            HTTPServerLogText.redacted("Failed to send data in request for /api/push/p/\(id).")
                == "Failed to send data in request for <path>.")
        #expect(HTTPServerLogText.isAboutOneConnection(headers))
        #expect(
            HTTPServerLogText.redacted("Failed to bind to port 0: Address already in use")
                == "Failed to bind: Address already in use")
        #expect(
            HTTPServerLogText.isAboutOneConnection(
                "Error processing request (HTTP response code is 400 ('Bad Request')). Closing connection."))
        #expect(
            HTTPServerLogText.isAboutOneConnection(
                "Connection socket is closed when reading request due to the error: reset"))
        for perRequest in [
            "Failed to parse `Content-Length' header. Closing connection.",
            "Not enough memory in pool to allocate header record!",
            "Closing connection (failed to create response header).",
        ] {
            #expect(HTTPServerLogText.isAboutOneConnection(perRequest))
        }
        #expect(!HTTPServerLogText.isAboutOneConnection("Server reached connection limit. Closing inbound connection."))
        #expect(HTTPServerLogText.redacted("Call to epoll_ctl failed: x") == "Call to epoll_ctl failed: x")
    }

    /// A client socket kept open between sends (a slow upload). Sends are small enough
    /// for the socket's buffer; the blocking read runs on a thread of its own, off
    /// the concurrency pool the servers' handlers need.
    /// A client thread's chunked upload: when it started, how many chunks it sent, when to stop.
    final class PacedUpload: Sendable {
        let started = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let chunks = Atomic<Int>(0)
        let stop = Atomic<Bool>(false)
    }

    /// Waits for `semaphore` without holding a thread of the Swift concurrency pool.
    static func wait(for semaphore: DispatchSemaphore) async {
        await withCheckedContinuation { (signalled: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                semaphore.wait()
                signalled.resume()
            }
        }
    }

    final class HeldConnection: @unchecked Sendable {
        private var fd: Int32

        init(port: Int) throws { fd = try ClientSocket.connect(port: port) }

        /// False once the server stopped taking the bytes (it closed the connection).
        @discardableResult func send(_ bytes: [UInt8]) -> Bool { ClientSocket.send(bytes, on: fd) }

        /// Everything until the server closes.
        func receiveAll() async -> [UInt8] {
            let fd = fd
            return await withCheckedContinuation { continuation in
                Thread.detachNewThread { continuation.resume(returning: ClientSocket.receiveAll(on: fd)) }
            }
        }

        func close() {
            if fd >= 0 { Glibc.close(fd) }
            fd = -1
        }

        deinit { close() }
    }
}
