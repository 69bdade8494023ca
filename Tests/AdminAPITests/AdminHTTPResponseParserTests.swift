import Testing

@testable import pushctl

/// pushctl's reading of HTTP/1.1 answers, byte by byte as they may arrive.
@Suite struct AdminHTTPResponseParserTests {
    /// Feeds `text` in pieces of `piece` bytes; the response, and after how many bytes it was complete.
    static func parse(_ text: String, piece: Int, closeAtEnd: Bool = false) throws -> (AdminHTTPResponse?, Int) {
        var parser = HTTPResponseParser()
        let bytes = Array(text.utf8)
        var fed = 0
        while fed < bytes.count {
            let end = min(fed + piece, bytes.count)
            if let response = try parser.append(bytes[fed..<end]) { return (response, end) }
            fed = end
        }
        return (closeAtEnd ? try parser.finish() : nil, fed)
    }

    @Test(arguments: [1, 7, 4096]) func aContentLengthFramesTheBody(piece: Int) throws {
        let text =
            "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\ncontent-length: 11\r\n\r\n{\"id\":\"a\"}\n"
        let (response, _) = try Self.parse(text, piece: piece)
        #expect(response == AdminHTTPResponse(status: 201, body: Array("{\"id\":\"a\"}\n".utf8)))
        let (partial, _) = try Self.parse(String(text.dropLast()), piece: piece)
        #expect(partial == nil)
    }

    @Test(arguments: [1, 5, 4096]) func chunksAreJoinedAndTheLastEndsTheBody(piece: Int) throws {
        let text =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\n{\"a\"\r\nA\r\n:[1,2,3,4]\r\n1\r\n}\r\n0\r\n\r\n"
        let (response, _) = try Self.parse(text, piece: piece)
        #expect(response == AdminHTTPResponse(status: 200, body: Array("{\"a\":[1,2,3,4]}".utf8)))
        let (partial, _) = try Self.parse(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n", piece: piece)
        #expect(partial == nil)
    }

    @Test func withoutFramingTheBodyRunsToTheClose() throws {
        let text = "HTTP/1.0 200 OK\r\n\r\n{\"ok\":true}"
        #expect(try Self.parse(text, piece: 3).0 == nil)
        #expect(
            try Self.parse(text, piece: 3, closeAtEnd: true).0
                == AdminHTTPResponse(status: 200, body: Array("{\"ok\":true}".utf8)))
        // A close before the head ended is no answer.
        #expect(try Self.parse("HTTP/1.1 200 OK\r\nContent-Le", piece: 3, closeAtEnd: true).0 == nil)
    }

    @Test func anInterimAnswerIsSkippedAndA204HasNoBody() throws {
        let text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"
        let (response, consumed) = try Self.parse(text, piece: 1)
        #expect(response == AdminHTTPResponse(status: 204, body: []))
        #expect(consumed == text.utf8.count)
    }

    @Test func somethingElseThanHTTPIsRefused() {
        #expect(throws: ChannelError.self) { try Self.parse("SSH-2.0-OpenSSH_9.2\r\n\r\n", piece: 100) }
        #expect(throws: ChannelError.self) {
            try Self.parse("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", piece: 100)
        }
        #expect(throws: ChannelError.self) {
            try Self.parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", piece: 100)
        }
    }
}
