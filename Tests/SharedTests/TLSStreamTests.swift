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
        let refusing = try refusingPort()
        defer { Foundation.close(refusing.socket) }
        for (host, port, code) in [
            ("127.0.0.1", refusing.port, TLSError.Code.connect), ("no-such-host.invalid", 443, .resolve),
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

    // MARK: Several addresses

    /// `sockaddr_in` bytes for 127.0.0.1:`port`, as the resolver hands them over.
    static func loopbackAddress(port: Int) -> [UInt8] {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    /// A port that refuses connections until its socket is closed: bound and never
    /// listening, so the kernel answers RST. Held, not merely found free: a free port
    /// could be handed to a listener of a test running alongside (it was, once).
    func refusingPort() throws -> (port: Int, socket: Int32) {
        let bound = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try withUnsafeMutablePointer(to: &address) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                try #require(bind(bound, $0, length) == 0)
                try #require(getsockname(bound, $0, &length) == 0)
            }
        }
        return (Int(UInt16(bigEndian: address.sin_port)), bound)
    }

    /// A listener whose accept queue is full and never served: the kernel drops
    /// further SYNs, so a connect to it neither succeeds nor fails (like a
    /// blackholed route). Returns its port and the sockets to close afterwards.
    func silentListener() throws -> (port: Int, sockets: [Int32]) {
        let (port, listener) = try refusingPort()
        try #require(listen(listener, 0) == 0)
        // Fill the queue: connections that complete but are never accepted.
        var sockets = [listener]
        for _ in 0..<2 {
            let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            var target = Self.loopbackAddress(port: port)
            _ = target.withUnsafeMutableBytes {
                Foundation.connect(filler, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count))
            }
            sockets.append(filler)
        }
        usleep(200_000)
        return (port, sockets)
    }

    func connect(
        loop: EventLoop, addresses: [[UInt8]], caFile: String, events: ClientEvents, timeout: Duration
    ) async throws -> UncheckedBox<TLSStream> {
        let context = try TLSContext.client(extraCAFile: caFile, alpn: ["h2"])
        return try await loop.submit {
            UncheckedBox(
                try TLSStream(
                    connectingTo: "localhost", port: 0, context: context, requireALPN: "h2", timeout: timeout,
                    loop: loop, delegate: events, resolver: { _, _ in .success(addresses) }))
        }
    }

    /// Waits for the client to connect or close; true if it connected.
    func connectedOrClosed(_ events: ClientEvents) async -> (connected: Bool, error: TLSError?) {
        await withTaskGroup(of: (Bool, TLSError?).self) { group in
            group.addTask {
                for await _ in events.connected.stream { return (true, nil) }
                return (false, nil)
            }
            group.addTask {
                for await error in events.closed.stream { return (false, error) }
                return (false, nil)
            }
            let first = await group.next() ?? (false, nil)
            events.connected.continuation.finish()
            events.closed.continuation.finish()
            group.cancelAll()
            return first
        }
    }

    /// Connects to [`first` (its port from `firstPort`, on the loop), a TLS echo
    /// server] within `timeout`; expects it to connect, and returns how long that took.
    func connectPast(
        timeout: Duration, _ firstPort: @escaping @Sendable (EventLoop) async throws -> Int
    ) async throws -> Duration {
        let loop = EventLoop(name: "tls-test")
        defer { loop.shutdown() }
        let certificates = try await TestCertificates.make()
        let (port, listener) = try await startEchoServer(loop: loop, certificates: certificates)
        let first = try await firstPort(loop)
        let events = ClientEvents()
        let started = ContinuousClock.now
        let client = try await connect(
            loop: loop, addresses: [Self.loopbackAddress(port: first), Self.loopbackAddress(port: port)],
            caFile: certificates.caFile, events: events, timeout: timeout)
        let outcome = await connectedOrClosed(events)
        let took = ContinuousClock.now - started
        #expect(outcome.connected, "closed with \(String(describing: outcome.error))")
        try await loop.submit {
            client.value.close()
            listener.value.close()
        }
        return took
    }

    @Test func anAddressThatRefusesGivesWayToTheNext() async throws {
        let refusing = try refusingPort()
        defer { Foundation.close(refusing.socket) }
        _ = try await connectPast(timeout: .seconds(5)) { _ in refusing.port }
    }

    @Test func anAddressThatDoesNotAnswerGivesWayToTheNextWithinTheTimeout() async throws {
        let silent = try silentListener()
        defer { for socket in silent.sockets { Foundation.close(socket) } }
        let waited = try await connectPast(timeout: .seconds(4)) { _ in silent.port }
        // It waited on the silent address for its share of the timeout, no longer.
        #expect(waited >= TLSStream.addressAttemptLimit(for: .seconds(4)))
        #expect(waited < .seconds(4))
    }

    /// Refused, then silent: the whole connect times out. Silent, then refused: the
    /// refusal is what is reported.
    @Test func whenEveryAddressFailsTheConnectionFails() async throws {
        let loop = EventLoop(name: "tls-test")
        defer { loop.shutdown() }
        let certificates = try await TestCertificates.make()
        let silent = try silentListener()
        defer { for socket in silent.sockets { Foundation.close(socket) } }
        let refused = try refusingPort()
        defer { Foundation.close(refused.socket) }
        let refusing = refused.port
        // Refused, then silent: the silent one has the rest of the timeout.
        let events = ClientEvents()
        _ = try await connect(
            loop: loop, addresses: [Self.loopbackAddress(port: refusing), Self.loopbackAddress(port: silent.port)],
            caFile: certificates.caFile, events: events, timeout: .seconds(1))
        let outcome = await connectedOrClosed(events)
        #expect(!outcome.connected)
        #expect(outcome.error?.code == .timeout)
        // Silent, then refused: the refusal is what is reported.
        let second = ClientEvents()
        _ = try await connect(
            loop: loop, addresses: [Self.loopbackAddress(port: silent.port), Self.loopbackAddress(port: refusing)],
            caFile: certificates.caFile, events: second, timeout: .seconds(1))
        let secondOutcome = await connectedOrClosed(second)
        #expect(secondOutcome.error?.code == .connect)
        #expect(secondOutcome.error?.reason.contains("refused") == true)
    }

    @Test func addressFamiliesAlternateFromTheResolversFirstChoice() {
        let v6a = [UInt8](repeating: 6, count: MemoryLayout<sockaddr_in6>.size)
        var v6b = v6a
        v6b[20] = 1
        let v4a = [UInt8](repeating: 4, count: MemoryLayout<sockaddr_in>.size)
        var v4b = v4a
        v4b[5] = 1
        #expect(TLSStream.alternatingFamilies([v6a, v6b, v4a, v4b]) == [v6a, v4a, v6b, v4b])
        #expect(TLSStream.alternatingFamilies([v4a, v4b, v6a]) == [v4a, v6a, v4b])
        #expect(TLSStream.alternatingFamilies([v4a, v4b]) == [v4a, v4b])
        #expect(TLSStream.alternatingFamilies([]) == [])
    }
}
