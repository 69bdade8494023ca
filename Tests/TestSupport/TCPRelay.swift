import Foundation
import Synchronization

/// A loopback TCP relay in front of a server the tests share (Postgres, Redis), so one test
/// can cut its own clients off without touching the server or the other tests.
/// While cut, the connections through it are closed and new ones are closed as soon
/// as they are accepted, as if the server had gone away; `restore()` lets them
/// through again. Blocking sockets, a thread per direction: a relay carries a
/// handful of pooled connections.
package final class TCPRelay: Sendable {
    package let port: Int
    private let upstream: sockaddr_in
    private let listener: Int32
    private let state = Mutex<State>(State())

    private struct State {
        var cut = false
        /// Bytes are held, not relayed: the server seems frozen (connections stay open).
        var frozen = false
        var closed = false
        /// Connections accepted, relayed or (while cut) closed at once.
        var accepted = 0
        var nextID = 0
        /// Each live relayed connection's two sockets (client side, server side). They
        /// are shut down and closed only under the lock, while listed here, so a
        /// descriptor number the system has reused is never touched.
        var connections: [Int: (Int32, Int32)] = [:]
    }

    /// Relays to `upstreamHost` (an IPv4 address) at `upstreamPort`.
    package init(upstreamHost: String, upstreamPort: Int) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(upstreamPort).bigEndian)
        guard inet_pton(AF_INET, upstreamHost, &address.sin_addr) == 1 else {
            throw RawHTTPClient.Failure(description: "relay upstream must be an IPv4 address: \(upstreamHost)")
        }
        upstream = address
        let (listener, port) = try Self.listen()
        self.listener = listener
        self.port = port
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// A relay in front of the server a `postgresql://` or `redis://` URL names, and
    /// that URL with the relay in the server's place.
    package static func inFront(of url: String) throws -> (relay: TCPRelay, url: String) {
        guard var components = URLComponents(string: url), let host = components.host else {
            throw RawHTTPClient.Failure(description: "not a URL: \(url)")
        }
        let defaultPort = components.scheme == "redis" ? 6379 : 5432
        let relay = try TCPRelay(
            upstreamHost: host == "localhost" ? "127.0.0.1" : host, upstreamPort: components.port ?? defaultPort)
        components.host = "127.0.0.1"
        components.port = relay.port
        return (relay, components.string ?? url)
    }

    /// Closes every connection through the relay and refuses new ones until `restore()`.
    package func cut() {
        state.withLock { state in
            state.cut = true
            // The pumps see their sockets end and close them (`finished`).
            for (client, server) in state.connections.values {
                _ = shutdown(client, Int32(SHUT_RDWR))
                _ = shutdown(server, Int32(SHUT_RDWR))
            }
        }
    }

    package func restore() {
        state.withLock { $0.cut = false }
    }

    /// Holds every byte in either direction, connections open, as a frozen server (or
    /// a network that drops everything) would, until `thaw()`.
    package func freeze() {
        state.withLock { $0.frozen = true }
    }

    package func thaw() {
        state.withLock { $0.frozen = false }
    }

    /// How many connections clients opened to the relay so far, cut or not.
    package var connectionsAccepted: Int {
        state.withLock { $0.accepted }
    }

    /// Stops listening and closes every connection. Call it: the accept thread holds
    /// the relay until then.
    package func close() {
        let alreadyClosed = state.withLock { state in
            defer { state.closed = true }
            return state.closed
        }
        guard !alreadyClosed else { return }
        cut()
        // Wakes the accept loop, which closes the socket.
        _ = shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                break
            }
            let admitted = state.withLock { state in
                state.accepted += 1
                return !state.cut && !state.closed
            }
            guard admitted, let server = connectUpstream() else {
                _ = Foundation.close(client)
                if state.withLock({ $0.closed }) { break }
                continue
            }
            let id = state.withLock { state -> Int? in
                guard !state.cut && !state.closed else { return nil }
                state.nextID += 1
                state.connections[state.nextID] = (client, server)
                return state.nextID
            }
            guard let id else {
                _ = Foundation.close(client)
                _ = Foundation.close(server)
                continue
            }
            // Each direction ends by shutting both sockets down; the second to end closes them.
            let ends = Atomic<Int>(0)
            let finished: @Sendable () -> Void = { [self] in
                guard ends.add(1, ordering: .acquiringAndReleasing).newValue == 2 else { return }
                state.withLock { state in
                    state.connections[id] = nil
                    _ = Foundation.close(client)
                    _ = Foundation.close(server)
                }
            }
            let frozen: @Sendable () -> Bool = { [self] in state.withLock { $0.frozen } }
            Thread.detachNewThread {
                Self.pump(from: client, to: server, holding: frozen)
                finished()
            }
            Thread.detachNewThread {
                Self.pump(from: server, to: client, holding: frozen)
                finished()
            }
        }
        _ = Foundation.close(listener)
    }

    private func connectUpstream() -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = upstream
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            _ = Foundation.close(fd)
            return nil
        }
        return fd
    }

    /// Copies bytes until either side ends, then shuts both sockets down so the
    /// other direction ends too; what arrives while `holding()` waits until it is false.
    private static func pump(from source: Int32, to destination: Int32, holding: @Sendable () -> Bool) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        copying: while true {
            let count = recv(source, &buffer, buffer.count, 0)
            if count <= 0 { break }
            while holding() { usleep(10_000) }
            var offset = 0
            while offset < count {
                let sent = buffer[offset..<count].withUnsafeBytes {
                    send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                if sent <= 0 { break copying }
                offset += sent
            }
        }
        _ = shutdown(source, Int32(SHUT_RDWR))
        _ = shutdown(destination, Int32(SHUT_RDWR))
    }

    private static func listen() throws -> (Int32, Int) {
        let (fd, port) = try UnusedPort.boundSocket()
        guard Foundation.listen(fd, 64) == 0 else {
            let failure = RawHTTPClient.Failure(description: "relay cannot listen: errno \(errno)")
            _ = Foundation.close(fd)
            throw failure
        }
        return (fd, port)
    }
}
