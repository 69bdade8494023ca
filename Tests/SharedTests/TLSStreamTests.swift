import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Shared

@Suite struct TLSStreamTests {
    /// Records a client stream's events and lets the test await them.
    final class ClientEvents: TLSStreamDelegate, @unchecked Sendable {
        // Mutated on the loop thread only; read by the test after `closed`/`connected` fired.
        var received: [UInt8] = []
        let connected = AsyncStream<Void>.makeStream()
        let echoed = AsyncStream<Void>.makeStream()
        let closed = AsyncStream<TLSError?>.makeStream()
        var expectedEcho = 0
        var alpn: String?

        func streamDidConnect(_ stream: TLSStream) {
            alpn = stream.alpnProtocol
            connected.continuation.yield()
        }
        func stream(_ stream: TLSStream, didReceive bytes: UnsafeRawBufferPointer) {
            received += bytes
            if received.count >= expectedEcho { echoed.continuation.yield() }
        }
        func streamDidDrain(_ stream: TLSStream) {}
        func stream(_ stream: TLSStream, didCloseWith error: TLSError?) {
            closed.continuation.yield(error)
        }
    }

    /// Writes back whatever it receives.
    final class EchoServer: TLSStreamDelegate {
        var streams: [ObjectIdentifier: TLSStream] = [:]
        func streamDidConnect(_ stream: TLSStream) {}
        func stream(_ stream: TLSStream, didReceive bytes: UnsafeRawBufferPointer) { stream.write(bytes) }
        func streamDidDrain(_ stream: TLSStream) {}
        func stream(_ stream: TLSStream, didCloseWith error: TLSError?) { streams[ObjectIdentifier(stream)] = nil }
    }

    /// A TLS echo server on loopback; returns its port. Lives until the loop stops.
    func startEchoServer(loop: EventLoop, certificates: TestCertificates) async throws -> (
        Int, UncheckedBox<TCPListener>
    ) {
        let context = try TLSContext.server(
            certificateChainPEM: certificates.serverCertificatePEM, privateKeyPEM: certificates.serverKeyPEM,
            alpn: ["h2"])
        let box = try await loop.submit {
            let echo = EchoServer()
            let listener = try TCPListener(address: ListenAddress(host: "127.0.0.1", port: 0), loop: loop) { fd in
                if let stream = try? TLSStream(acceptedSocket: fd, context: context, loop: loop, delegate: echo) {
                    echo.streams[ObjectIdentifier(stream)] = stream
                }
            }
            return UncheckedBox((listener, echo))
        }
        return (box.value.0.port, UncheckedBox(box.value.0))
    }

    func connect(
        loop: EventLoop, host: String, port: Int, caFile: String?, events: ClientEvents, timeout: Duration = .seconds(5)
    ) async throws -> UncheckedBox<TLSStream> {
        let context = try TLSContext.client(extraCAFile: caFile, alpn: ["h2"])
        return try await loop.submit {
            UncheckedBox(
                try TLSStream(
                    connectingTo: host, port: port, context: context, requireALPN: "h2", timeout: timeout, loop: loop,
                    delegate: events))
        }
    }

    @Test func verifiedConnectionAgreesOnH2AndCarriesBytesBothWays() async throws {
        let loop = EventLoop(name: "tls-test")
        defer { loop.shutdown() }
        let certificates = try await TestCertificates.make()
        let (port, listener) = try await startEchoServer(loop: loop, certificates: certificates)
        let events = ClientEvents()
        let payload = (0..<100_000).map { UInt8($0 % 251) }
        events.expectedEcho = payload.count
        let client = try await connect(
            loop: loop, host: "localhost", port: port, caFile: certificates.caFile, events: events)
        for await _ in events.connected.stream { break }
        try await loop.submit { client.value.write(payload) }
        for await _ in events.echoed.stream { break }
        let (received, alpn) = try await loop.submit { (events.received, events.alpn) }
        #expect(alpn == "h2")
        #expect(received == payload)
        try await loop.submit {
            client.value.close()
            listener.value.close()
        }
    }

    @Test func serverFromAnUnknownCAIsRefused() async throws {
        let loop = EventLoop(name: "tls-test")
        defer { loop.shutdown() }
        let certificates = try await TestCertificates.make()
        let (port, _) = try await startEchoServer(loop: loop, certificates: certificates)
        let events = ClientEvents()
        _ = try await connect(loop: loop, host: "localhost", port: port, caFile: nil, events: events)
        var closedWith: TLSError?? = .none
        for await error in events.closed.stream {
            closedWith = error
            break
        }
        let error = try #require(closedWith ?? nil)
        #expect(error.code == .certificateVerification)
    }

    @Test func certificateForAnotherHostNameIsRefused() async throws {
        let loop = EventLoop(name: "tls-test")
        defer { loop.shutdown() }
        let certificates = try await TestCertificates.make(serverNames: ["api.push.example"])
        let (port, _) = try await startEchoServer(loop: loop, certificates: certificates)
        let events = ClientEvents()
        _ = try await connect(loop: loop, host: "localhost", port: port, caFile: certificates.caFile, events: events)
        var closedWith: TLSError?? = .none
        for await error in events.closed.stream {
            closedWith = error
            break
        }
        let error = try #require(closedWith ?? nil)
        #expect(error.code == .certificateVerification)
        #expect(error.reason.contains("mismatch"))
    }

    @Test func refusedAndUnresolvableHostsFailWithTheirCodes() async throws {
        let loop = EventLoop(name: "tls-test")
        defer { loop.shutdown() }
        // A port nobody listens on: bind one, note it, close it.
        let unusedPort = try await loop.submit {
            let listener = try TCPListener(address: ListenAddress(host: "127.0.0.1", port: 0), loop: loop) {
                Foundation.close($0)
            }
            defer { listener.close() }
            return listener.port
        }
        for (host, port, code) in [
            ("127.0.0.1", unusedPort, TLSError.Code.connect), ("no-such-host.invalid", 443, .resolve),
        ] {
            let events = ClientEvents()
            _ = try await connect(loop: loop, host: host, port: port, caFile: nil, events: events)
            var closedWith: TLSError?? = .none
            for await error in events.closed.stream {
                closedWith = error
                break
            }
            #expect((closedWith ?? nil)?.code == code)
        }
    }
}
