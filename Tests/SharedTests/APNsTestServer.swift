import CNGHTTP2
import Foundation
import TestSupport

@testable import Shared

/// A small APNs-like HTTP/2 server for the client's tests (the strict simulator
/// replaces it for reason-by-reason checks). It runs on its own event loop; the
/// test decides each answer with `decide` and reads what happened with `stats()`.
///
/// It advertises `initialMaxStreams`, raises it to `raisedMaxStreams` after the
/// first 200 on a connection (as APNs does once a token is accepted), holds
/// answers for `answerDelay` so streams pile up, and counts how many streams are
/// open at once per connection (received, not yet answered). With `goAwayAfter`,
/// a connection's n-th request makes it send GOAWAY naming that request's stream
/// as the last processed; requests above it are never answered.
final class APNsTestServer: HTTP2ConnectionDelegate, @unchecked Sendable {
    struct Request {
        let headers: [HTTP2Header]
        let body: [UInt8]
        /// How many times this `apns-id` was seen before (0 on the first attempt).
        let attempt: Int
        var apnsID: String { headers["apns-id"] ?? "" }
        var authorization: String { headers["authorization"] ?? "" }
    }

    enum Action {
        case respond(status: Int, body: String)
        case refuse
        case ignore

        static let ok = Action.respond(status: 200, body: "")
    }

    struct Stats: Sendable {
        var connectionsAccepted = 0
        var delivered = 0
        var requests = 0
        var refused = 0
        /// The most streams ever open at once on one connection.
        var maxOpenStreams = 0
        /// Times a connection had more streams open than it advertised.
        var limitViolations = 0
        var goAwaysSent = 0
        /// Answers sent per `apns-id`.
        var answered: [String: Int] = [:]
        /// Requests seen per `authorization` value.
        var authorizations: [String: Int] = [:]
    }

    final class ConnectionState {
        let http2: HTTP2Connection
        var advertised: Int
        var open: Set<Int32> = []
        var requests = 0
        var maxAnswered: Int32 = 0
        var goAwayLast: Int32?
        var raised = false
        init(http2: HTTP2Connection, advertised: Int) {
            self.http2 = http2
            self.advertised = advertised
        }
    }

    let loop: EventLoop
    let port: Int
    let certificates: TestCertificates
    // Loop-confined from here on.
    var decide: (Request) -> Action = { _ in .ok }
    var initialMaxStreams: UInt32
    var raisedMaxStreams: UInt32?
    var answerDelay: Duration = .milliseconds(1)
    var goAwayAfter: Int?
    var goAwayLinger: Duration = .milliseconds(50)
    private var listener: TCPListener?
    private var connections: [ObjectIdentifier: ConnectionState] = [:]
    private var statistics = Stats()
    private var attempts: [String: Int] = [:]
    private struct Pending {
        let state: ConnectionState
        let streamID: Int32
        let apnsID: String
        let action: Action
    }
    private var pending: [Pending] = []
    private var flushTimer: EventLoop.TimerID?

    private init(loop: EventLoop, port: Int, certificates: TestCertificates, initialMaxStreams: UInt32) {
        self.loop = loop
        self.port = port
        self.certificates = certificates
        self.initialMaxStreams = initialMaxStreams
    }

    /// Starts a server on 127.0.0.1 (certificate for `localhost`) on a new loop.
    static func start(
        initialMaxStreams: UInt32 = 1, raisedMaxStreams: UInt32? = 100,
        configure: @escaping @Sendable (APNsTestServer) -> Void = { _ in }
    ) async throws -> APNsTestServer {
        let loop = EventLoop(name: "apns-test-server")
        let certificates = try await TestCertificates.make()
        let context = try TLSContext.server(
            certificateChainPEM: certificates.serverCertificatePEM, privateKeyPEM: certificates.serverKeyPEM,
            alpn: ["h2"])
        return try await loop.submit {
            let holder = UncheckedBox(NSMutableArray())
            let listener = try TCPListener(address: ListenAddress(host: "127.0.0.1", port: 0), loop: loop) { fd in
                (holder.value.firstObject as? APNsTestServer)?.accept(fd, context: context)
            }
            let server = APNsTestServer(
                loop: loop, port: listener.port, certificates: certificates, initialMaxStreams: initialMaxStreams)
            server.raisedMaxStreams = raisedMaxStreams
            server.listener = listener
            holder.value.add(server)
            configure(server)
            return server
        }
    }

    var environment: APNsEnvironment { APNsEnvironment(name: "test", host: "localhost", port: port) }

    /// Runs `body` on the server's loop.
    func onLoop<Value: Sendable>(_ body: @escaping @Sendable (APNsTestServer) -> Value) async throws -> Value {
        try await loop.submit { body(self) }
    }

    func stats() async throws -> Stats { try await onLoop { $0.statistics } }

    func stop() {
        loop.execute { [self] in
            listener?.close()
            for state in connections.values { state.http2.close() }
        }
        loop.shutdown()
    }

    // MARK: Loop thread

    private func accept(_ fd: Int32, context: TLSContext) {
        guard
            let http2 = try? HTTP2Connection(
                role: .server, settings: [(Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), initialMaxStreams)]),
            let tls = try? TLSStream(acceptedSocket: fd, context: context, loop: loop, delegate: http2)
        else { return }
        http2.delegate = self
        http2.attach(tls)
        connections[ObjectIdentifier(http2)] = ConnectionState(http2: http2, advertised: Int(initialMaxStreams))
        statistics.connectionsAccepted += 1
    }

    func connectionDidBecomeReady(_ connection: HTTP2Connection) {}

    func connection(
        _ connection: HTTP2Connection, streamDidFinish streamID: Int32, headers: [HTTP2Header], body: [UInt8]
    ) {
        statistics.delivered += 1
        guard let state = connections[ObjectIdentifier(connection)] else { return }
        if let last = state.goAwayLast, streamID > last { return }  // after GOAWAY: not processed
        let apnsID = headers["apns-id"] ?? ""
        let request = Request(headers: headers, body: body, attempt: attempts[apnsID, default: 0])
        attempts[apnsID, default: 0] += 1
        statistics.requests += 1
        statistics.authorizations[request.authorization, default: 0] += 1
        state.requests += 1
        state.open.insert(streamID)
        statistics.maxOpenStreams = max(statistics.maxOpenStreams, state.open.count)
        if state.open.count > state.advertised { statistics.limitViolations += 1 }
        if let goAwayAfter, state.requests == goAwayAfter {
            // A graceful GOAWAY: this request is the last one processed (answered a little
            // later, which keeps the connection open meanwhile, so requests the client sent
            // before it heard the GOAWAY are read and ignored rather than met by a reset).
            state.goAwayLast = streamID
            statistics.goAwaysSent += 1
            connection.goAway(lastStreamID: streamID)
            let answer = Pending(state: state, streamID: streamID, apnsID: apnsID, action: decide(request))
            loop.schedule(after: goAwayLinger) { [weak self] in
                self?.pending.append(answer)
                self?.flush()
            }
            return
        }
        pending.append(Pending(state: state, streamID: streamID, apnsID: apnsID, action: decide(request)))
        if flushTimer == nil {
            flushTimer = loop.schedule(after: answerDelay) { [weak self] in self?.flush() }
        }
    }

    private func flush() {
        flushTimer = nil
        let batch = pending
        pending.removeAll()
        for item in batch {
            let (state, streamID) = (item.state, item.streamID)
            state.open.remove(streamID)
            guard !state.http2.isClosed else { continue }
            switch item.action {
            case .respond(let status, let body):
                state.http2.sendResponse(
                    streamID: streamID,
                    headers: [HTTP2Header(":status", String(status)), HTTP2Header("apns-id", item.apnsID)],
                    body: Array(body.utf8))
                state.maxAnswered = max(state.maxAnswered, streamID)
                statistics.answered[item.apnsID, default: 0] += 1
                if status == 200, !state.raised, let raised = raisedMaxStreams {
                    state.raised = true
                    state.advertised = Int(raised)
                    state.http2.updateSettings([(Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), raised)])
                }
            case .refuse:
                statistics.refused += 1
                state.http2.resetStream(streamID, errorCode: NGHTTP2_REFUSED_STREAM.rawValue)
            case .ignore:
                state.open.insert(streamID)  // stays open, never answered
            }
        }
    }

    func connection(_ connection: HTTP2Connection, streamWasReset streamID: Int32, errorCode: UInt32) {
        guard let state = connections[ObjectIdentifier(connection)] else { return }
        state.open.remove(streamID)
        pending.removeAll { $0.state === state && $0.streamID == streamID }
    }

    func connection(_ connection: HTTP2Connection, didCloseWith error: (any Error)?) {
        guard let state = connections.removeValue(forKey: ObjectIdentifier(connection)) else { return }
        pending.removeAll { $0.state === state }
    }
}
