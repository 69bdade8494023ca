import CNGHTTP2

/// One HTTP/2 connection to APNs, owned by a pool. Loop-confined: every method
/// and callback runs on the pool's event loop, so its state needs no locks.
///
/// It keeps its own count of open streams and never opens more than the peer's
/// `SETTINGS_MAX_CONCURRENT_STREAMS` (capped by configuration). Until the peer's
/// SETTINGS are known (a change is reported, or a first answer arrived, which
/// follows them) it assumes one stream, as APNs grants before a token is accepted.
final class APNsConnection: HTTP2ConnectionDelegate {
    enum State: Equatable {
        /// Resolving, connecting, TLS handshake.
        case connecting
        case ready
        /// GOAWAY sent or received: the streams it still has finish, no new ones start.
        case draining
        case closed
    }

    let id: Int
    private(set) var state = State.connecting
    /// Whether any answer ever arrived: a connection that never answered counts
    /// as a failed attempt for the pool's backoff.
    private(set) var hasAnswered = false
    /// `unowned`, not `weak` (which would make every retain of the pool a slow one):
    /// the pool owns its connections, and nothing else keeps one alive.
    private unowned let pool: APNsConnectionPool
    private let http2: HTTP2Connection
    private let configuration: APNsClient.Configuration
    private let loop: EventLoop
    // Touched for every request and answer, only on the loop and never while another
    // access is under way: the runtime's exclusivity check is skipped for these.
    @exclusivity(unchecked) private var inFlight: [Int32: APNsPendingRequest] = [:]
    /// Request after request's header fields, written here just before nghttp2 copies them.
    @exclusivity(unchecked) private var requestFields = HTTP2HeaderFields(reservingCapacity: 11, bytes: 1024)
    /// No request in flight has an earlier deadline (answered requests do not move
    /// it on), so `tick` looks for expired ones only from then on; nil: none in flight.
    private var earliestDeadline: ContinuousClock.Instant?
    private var settingsKnown = false
    private var lastActivity = ContinuousClock.now
    private var pingSentAt: ContinuousClock.Instant?
    /// Why we closed it ourselves, for the pool.
    private var closeReason: APNsClientError?

    /// Starts connecting (DNS is resolved afresh by the TLS stream). Call on `loop`.
    init(
        id: Int, environment: APNsEnvironment, context: TLSContext, configuration: APNsClient.Configuration,
        loop: EventLoop, pool: APNsConnectionPool
    ) throws {
        self.id = id
        self.pool = pool
        self.configuration = configuration
        self.loop = loop
        http2 = try HTTP2Connection(role: .client)
        http2.delegate = self
        http2.keptHeaderNames = APNsResponse.headerNames
        let tls = try TLSStream(
            connectingTo: environment.host, port: environment.port, context: context, requireALPN: "h2",
            timeout: configuration.connectTimeout, loop: loop, delegate: http2)
        http2.attach(tls)
    }

    /// Requests on this connection now.
    var load: Int { inFlight.count }

    /// Streams we may open now.
    var freeStreams: Int {
        guard state == .ready else { return 0 }
        let limit = settingsKnown ? min(http2.remoteMaxConcurrentStreams, configuration.maxStreamsPerConnection) : 1
        return max(limit - inFlight.count, 0)
    }

    /// Sends `request` on a new stream. False if the connection cannot take it
    /// (it then drains); the caller queues the request again.
    func start(_ request: APNsPendingRequest) -> Bool {
        guard freeStreams > 0 else { return false }
        do {
            // Only submitted here (the frames leave at the end of the loop iteration), so
            // the stream is ours from now on: a close or reset before the answer reaches
            // it through `inFlight`, never by sending the request again from here.
            let payload = request.writeRequest(into: &requestFields)
            let streamID = try http2.sendRequest(requestFields, body: payload)
            inFlight[streamID] = request
            earliestDeadline = min(earliestDeadline ?? request.deadline, request.deadline)
            return true
        } catch {
            state = .draining
            closeIfDrained()
            return false
        }
    }

    /// Periodic work: times out requests past their deadline and checks health
    /// with PING: sent once nothing was heard for `idlePingInterval`, or for
    /// `busyPingInterval` while requests wait for answers; no ack within
    /// `pingTimeout` closes the connection (the pool replaces it).
    func tick(now: ContinuousClock.Instant) {
        if let earliestDeadline, now >= earliestDeadline { failExpired(now: now) }
        guard state == .ready || state == .draining else { return }
        if let pingSentAt {
            if now - pingSentAt > configuration.pingTimeout {
                pool.connectionMissedPing(self)
                close(APNsClientError(.connection, "no PING acknowledgement within \(configuration.pingTimeout)"))
            }
        } else if now - lastActivity
            >= (inFlight.isEmpty ? configuration.idlePingInterval : configuration.busyPingInterval)
        {
            pingSentAt = now
            http2.ping()
        }
    }

    private func failExpired(now: ContinuousClock.Instant) {
        let expired = inFlight.filter { $0.value.deadline <= now }
        for (streamID, request) in expired {
            inFlight[streamID] = nil
            http2.resetStream(streamID, errorCode: NGHTTP2_CANCEL.rawValue)
            request.fail(APNsClientError(.timeout, "no answer from APNs within the request timeout"))
        }
        earliestDeadline = inFlight.values.lazy.map(\.deadline).min()
        if !expired.isEmpty { pool.connectionHasCapacity(self) }
    }

    /// Shutdown: fails what is still in flight with `error`, sends GOAWAY and closes.
    func shutDown(failingWith error: APNsClientError) {
        let remaining = inFlight
        inFlight.removeAll()
        for request in remaining.values { request.fail(error) }
        if state != .closed {
            state = .draining
            http2.goAway()
            http2.close()
        }
    }

    /// Closes at once; requests in flight fail with `.connection`.
    func close(_ reason: APNsClientError) {
        guard state != .closed else { return }
        closeReason = reason
        http2.close(error: reason)
    }

    /// Takes no more requests and closes once those in flight have answered. After
    /// `TooManyProviderTokenUpdates` APNs keeps this connection on its previous token
    /// until the update period is over, refusing every request with the current one;
    /// a new connection takes the current token at once.
    private func retire() {
        guard state == .ready || state == .connecting else { return }
        state = .draining
        http2.goAway()
        pool.connectionRetired(self, reason: "TooManyProviderTokenUpdates")
    }

    private func closeIfDrained() {
        if state == .draining && inFlight.isEmpty {
            http2.close()
        }
    }

    // MARK: HTTP2ConnectionDelegate

    func connectionDidBecomeReady(_ connection: HTTP2Connection) {
        guard state == .connecting else { return }
        state = .ready
        lastActivity = .now
        pool.connectionBecameReady(self)
    }

    func connection(
        _ connection: HTTP2Connection, streamDidFinish streamID: Int32, fields: HTTP2ReceivedFields, body: [UInt8]
    ) {
        guard let request = inFlight.removeValue(forKey: streamID) else { return }
        // The peer's SETTINGS come first on a connection, so they are known now.
        settingsKnown = true
        hasAnswered = true
        lastActivity = .now
        if let response = APNsResponse(fields: fields, body: body) {
            request.complete(.success(response))
            if response.reason == .tooManyProviderTokenUpdates { retire() }
        } else {
            request.fail(APNsClientError(.protocolError, "an answer without a valid :status"))
        }
        pool.connectionAnswered(self)
        closeIfDrained()
    }

    func connection(_ connection: HTTP2Connection, streamWasReset streamID: Int32, errorCode: UInt32) {
        guard let request = inFlight.removeValue(forKey: streamID) else { return }
        if errorCode == NGHTTP2_REFUSED_STREAM.rawValue {
            // Not processed by the server (RFC 9113 §8.7): safe to send again.
            pool.retry(request, after: .refusedStream)
        } else if connection.isClosed {
            request.fail(
                APNsClientError(
                    .connection, "the connection was lost with the request in flight; it may have been delivered",
                    underlying: closeReason))
        } else {
            request.fail(APNsClientError(.connection, "APNs reset the stream (HTTP/2 error \(errorCode))"))
        }
        pool.connectionHasCapacity(self)
        closeIfDrained()
    }

    /// Apple may say why in the frame's debug data (`{"reason": …}`): the pool logs it.
    func connection(
        _ connection: HTTP2Connection, didReceiveGoAway lastStreamID: Int32, errorCode: UInt32, debugData: [UInt8]
    ) {
        if state != .closed { state = .draining }
        // Streams above `lastStreamID` were not processed: they go to another connection.
        let unprocessed = inFlight.keys.filter { $0 > lastStreamID }.sorted()
        for streamID in unprocessed {
            if let request = inFlight.removeValue(forKey: streamID) { pool.retry(request, after: .goAway) }
        }
        pool.connectionIsDraining(self, errorCode: errorCode, reason: APNsReason(body: debugData))
        closeIfDrained()
    }

    func connection(_ connection: HTTP2Connection, didChangeMaxConcurrentStreams limit: Int) {
        settingsKnown = true
        pool.connectionHasCapacity(self)
    }

    func connection(_ connection: HTTP2Connection, didReceivePingAck: Void) {
        pingSentAt = nil
        lastActivity = .now
    }

    func connection(_ connection: HTTP2Connection, didCloseWith error: (any Error)?) {
        let wasConnecting = state == .connecting
        state = .closed
        // HTTP2Connection reported every unfinished stream reset already; this is a safety net.
        let remaining = inFlight
        inFlight.removeAll()
        for request in remaining.values {
            request.fail(APNsClientError(.connection, "the connection closed with the request in flight"))
        }
        pool.connectionDidClose(self, error: closeReason ?? error, duringConnect: wasConnecting)
    }
}
