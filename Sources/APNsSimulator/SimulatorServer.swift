import CNGHTTP2
import Foundation
import Shared
import Synchronization

/// The APNs side: a TCP listener on the first event loop, accepted connections
/// handed round-robin to all loops (one per core by default), each served as
/// TLS (ALPN `h2` only) + HTTP/2 by a `SimulatorConnection`.
final class SimulatorServer: Sendable {
    let state: SimulatorState
    let loops: [EventLoop]
    /// The port actually bound.
    let port: Int
    private let registries: [LoopConnections]
    private let listener: Mutex<ListenerBox?>
    private let logger: Logger

    /// Connections of one loop; touched only on that loop's thread, which is
    /// what makes the `@unchecked Sendable` safe.
    private final class LoopConnections: @unchecked Sendable {
        let loop: EventLoop
        var connections: [ObjectIdentifier: SimulatorConnection] = [:]
        init(loop: EventLoop) { self.loop = loop }
    }

    /// The listener belongs to the first loop; this only carries it to `shutdown`.
    private struct ListenerBox: @unchecked Sendable {
        let listener: TCPListener
    }

    /// Binds `address` and starts serving with `tls`.
    static func start(
        address: ListenAddress, tls: TLSContext, state: SimulatorState, logger: Logger
    ) async throws -> SimulatorServer {
        let loops = (0..<state.configuration.eventLoops).map { EventLoop(name: "apns-sim-\($0)") }
        let registries = loops.map { LoopConnections(loop: $0) }
        let acceptor = Acceptor(registries: registries, tls: tls, state: state, logger: logger)
        do {
            let box = try await loops[0].submit {
                ListenerBox(listener: try TCPListener(address: address, loop: loops[0]) { acceptor.accept($0) })
            }
            return SimulatorServer(
                state: state, loops: loops, port: box.listener.port, registries: registries, listener: box,
                logger: logger)
        } catch {
            for loop in loops { loop.shutdown() }
            throw error
        }
    }

    private init(
        state: SimulatorState, loops: [EventLoop], port: Int, registries: [LoopConnections], listener: ListenerBox,
        logger: Logger
    ) {
        self.state = state
        self.loops = loops
        self.port = port
        self.registries = registries
        self.listener = Mutex(listener)
        self.logger = logger
    }

    /// Sends GOAWAY on every open connection; returns how many. With
    /// `lastStreamID`, streams above it still in flight are refused unanswered.
    func goAwayAll(
        lastStreamID: Int32? = nil, errorCode: UInt32 = NGHTTP2_NO_ERROR.rawValue, reason: String? = nil
    ) async -> Int {
        var total = 0
        for registry in registries {
            total +=
                (try? await registry.loop.submit {
                    // An idle connection closes as soon as its GOAWAY is out, leaving the registry.
                    let connections = Array(registry.connections.values)
                    for connection in connections {
                        connection.goAway(lastStreamID: lastStreamID, errorCode: errorCode, reason: reason)
                    }
                    return connections.count
                }) ?? 0
        }
        state.noteGoAways(total)
        return total
    }

    /// Connections open now.
    func openConnections() async -> Int {
        var total = 0
        for registry in registries {
            total += (try? await registry.loop.submit { registry.connections.count }) ?? 0
        }
        return total
    }

    /// Stops accepting, sends GOAWAY to every connection, waits up to `deadline`
    /// for them to finish their streams and close, closes the rest and stops the loops.
    func shutdown(deadline: Duration = .seconds(2)) async {
        guard let box = listener.withLock({ $0.take() }) else { return }
        try? await loops[0].submit { box.listener.close() }
        _ = await goAwayAll()
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: deadline)
        while clock.now < end, await openConnections() > 0 {
            try? await Task.sleep(for: .milliseconds(20))
        }
        for registry in registries {
            try? await registry.loop.submit {
                for connection in registry.connections.values { connection.http2.close() }
            }
        }
        for loop in loops { loop.shutdown() }
    }

    /// Accepts on the first loop and spreads connections over all of them.
    private final class Acceptor: @unchecked Sendable {
        // `next` is touched only on the first loop (where the listener calls `accept`).
        private var next = 0
        private let registries: [LoopConnections]
        private let tls: TLSContext
        private let state: SimulatorState
        private let logger: Logger

        init(registries: [LoopConnections], tls: TLSContext, state: SimulatorState, logger: Logger) {
            self.registries = registries
            self.tls = tls
            self.state = state
            self.logger = logger
        }

        func accept(_ fd: Int32) {
            let registry = registries[next % registries.count]
            next &+= 1
            if registry.loop.inEventLoop {
                serve(fd, on: registry)
            } else {
                registry.loop.execute { self.serve(fd, on: registry) }
            }
        }

        /// On `registry`'s loop.
        private func serve(_ fd: Int32, on registry: LoopConnections) {
            let http2: HTTP2Connection
            do {
                // APNs lets a connection open one stream until a provider token is accepted.
                http2 = try HTTP2Connection(
                    role: .server, settings: [(Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), 1)])
            } catch {
                logger.error("cannot create an HTTP/2 session", metadata: ["error": "\(error)"])
                close(fd)
                return
            }
            let connection = SimulatorConnection(
                id: state.connectionOpened(), http2: http2, loop: registry.loop, state: state, logger: logger
            ) { [state] closed in
                registry.connections[ObjectIdentifier(closed)] = nil
                state.connectionClosed()
            }
            http2.delegate = connection
            registry.connections[ObjectIdentifier(connection)] = connection
            do {
                let stream = try TLSStream(acceptedSocket: fd, context: tls, loop: registry.loop, delegate: http2)
                http2.attach(stream)
            } catch {
                logger.warning("cannot start TLS on an accepted connection", metadata: ["error": "\(error)"])
                registry.connections[ObjectIdentifier(connection)] = nil
                state.connectionClosed()
                close(fd)
            }
        }
    }
}
