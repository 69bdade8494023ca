/// The connections to one APNs environment for one credential, and the requests
/// waiting for a free stream on them. Loop-confined.
///
/// Connections open lazily, up to `connectionsPerPool`, when requests wait that
/// the open ones cannot take. A request goes to the least loaded connection with
/// a free stream. A connection that fails before ever answering counts as a
/// failure: the next attempt waits for the backoff delay, and while failures
/// persist only one attempt is under way at a time. When the last attempt failed
/// and no connection is left, the waiting requests fail with that error.
final class APNsConnectionPool {
    enum RetryCause { case goAway, refusedStream }

    let key: APNsPoolKey
    private let context: TLSContext
    private let configuration: APNsClient.Configuration
    private let loop: EventLoop
    private let logger: Logger
    private let counters: APNsClientCounters
    private var connections: [APNsConnection] = []
    private var queue: APNsRequestQueue<APNsPendingRequest>
    private var nextConnectionID = 0
    private var failures = 0
    private var nextAttempt = ContinuousClock.now
    private var reconnectTimer: EventLoop.TimerID?
    private var pumpScheduled = false
    private var shuttingDown = false
    /// `finishShutdown` closes every connection: closes then are not failures.
    private var closingAll = false

    init(
        key: APNsPoolKey, context: TLSContext, configuration: APNsClient.Configuration, loop: EventLoop, logger: Logger,
        counters: APNsClientCounters
    ) {
        self.key = key
        self.context = context
        self.configuration = configuration
        self.loop = loop
        self.logger = logger.child(
            "pool", metadata: ["apns.environment": key.environment.name, "apns.credential": key.credentialID])
        self.counters = counters
        self.queue = APNsRequestQueue(capacity: configuration.queueCapacity)
    }

    /// Nothing waiting and nothing in flight.
    var isIdle: Bool { queue.isEmpty && connections.allSatisfy { $0.load == 0 } }

    /// Takes a new request: onto a free stream at once, else into the queue, else
    /// (queue full) fails it with `overloaded`.
    func submit(_ request: APNsPendingRequest) {
        guard !shuttingDown else {
            request.fail(APNsClientError(.shutdown, "the APNs client is shutting down"))
            return
        }
        if queue.isEmpty, let connection = leastLoaded(), connection.start(request) { return }
        guard queue.append(request) else {
            counters.overloaded.add(1, ordering: .relaxed)
            request.fail(
                APNsClientError(
                    .overloaded, "\(queue.capacity) requests are already waiting for \(key.environment.name)"))
            return
        }
        pump()
    }

    /// Sends a request again on whichever connection is free next.
    func retry(_ request: APNsPendingRequest, after cause: RetryCause) {
        switch cause {
        case .goAway: counters.retriedAfterGoAway.add(1, ordering: .relaxed)
        case .refusedStream: counters.retriedAfterRefusal.add(1, ordering: .relaxed)
        }
        guard request.retries < configuration.maxRetries else {
            request.fail(APNsClientError(.connection, "not processed by APNs after \(request.retries + 1) attempts"))
            return
        }
        var request = request
        request.retries += 1
        queue.requeue(request)
        schedulePump()
    }

    // MARK: Events from connections

    func connectionBecameReady(_ connection: APNsConnection) {
        logger.debug("connection \(connection.id) ready")
        schedulePump()
    }

    func connectionAnswered(_ connection: APNsConnection) {
        failures = 0
        schedulePump()
    }

    func connectionHasCapacity(_ connection: APNsConnection) { schedulePump() }

    func connectionIsDraining(_ connection: APNsConnection, errorCode: UInt32, reason: APNsReason?) {
        var metadata: Logger.Metadata = ["http2.error": String(errorCode)]
        if let reason { metadata["apns.reason"] = reason.name }
        // Apple's reason (e.g. a credential refused for the whole connection) is the
        // operator's to see: logged louder than a plain GOAWAY.
        if reason != nil {
            logger.warning("connection \(connection.id) received GOAWAY from APNs", metadata: metadata)
        } else {
            logger.info("connection \(connection.id) received GOAWAY", metadata: metadata)
        }
        schedulePump()  // a replacement opens if requests wait
    }

    func connectionRetired(_ connection: APNsConnection, reason: String) {
        logger.notice("connection \(connection.id) replaced", metadata: ["apns.reason": reason])
        schedulePump()  // a replacement opens if requests wait
    }

    func connectionMissedPing(_ connection: APNsConnection) {
        counters.pingTimeouts.add(1, ordering: .relaxed)
        logger.notice("connection \(connection.id) did not answer PING; replacing it")
    }

    func connectionDidClose(_ connection: APNsConnection, error: (any Error)?, duringConnect: Bool) {
        connections.removeAll { $0 === connection }
        counters.connectionsClosed.add(1, ordering: .relaxed)
        if connection.hasAnswered || closingAll {
            // Closed at the end of a shutdown before any answer (slow APNs, a short
            // drain) is no failure of APNs: no backoff, no warning.
            logger.debug("connection \(connection.id) closed")
        } else {
            let failure = Self.classify(error, duringConnect: duringConnect, environment: key.environment)
            recordFailure(failure)
        }
        schedulePump()
    }

    // MARK: Periodic work and shutdown

    /// Fails queued requests past their deadline and lets connections check theirs.
    func tick(now: ContinuousClock.Instant) {
        let expired = queue.removeAll { $0.deadline <= now }
        for request in expired {
            counters.timeouts.add(1, ordering: .relaxed)
            request.fail(APNsClientError(.timeout, "no free stream to APNs within the request timeout"))
        }
        for connection in connections { connection.tick(now: now) }
    }

    /// Takes no new requests; queued and in-flight ones go on.
    func beginShutdown() { shuttingDown = true }

    /// Fails whatever is left with `shutdown`, sends GOAWAY and closes every connection.
    func finishShutdown() {
        shuttingDown = true
        closingAll = true
        if let reconnectTimer { loop.cancel(reconnectTimer) }
        reconnectTimer = nil
        let error = APNsClientError(.shutdown, "the APNs client shut down before an answer arrived")
        for request in queue.removeAll() { request.fail(error) }
        for connection in connections { connection.shutDown(failingWith: error) }
    }

    // MARK: Dispatching

    private func leastLoaded() -> APNsConnection? {
        var best: APNsConnection?
        for connection in connections where connection.freeStreams > 0 {
            if best == nil || connection.load < best!.load { best = connection }
        }
        return best
    }

    /// Runs `pump` at the end of this loop iteration, outside the nghttp2 callback
    /// that asked for it, once for all the answers and resets read meanwhile.
    private func schedulePump() {
        guard !pumpScheduled else { return }
        pumpScheduled = true
        // A strong capture (for the rest of this iteration) keeps the pool free of weak references.
        loop.deferToEndOfIteration { [self] in pump() }
    }

    /// Moves queued requests onto free streams, then opens connections if some still wait.
    private func pump() {
        pumpScheduled = false
        while !queue.isEmpty, let connection = leastLoaded() {
            guard let request = queue.popFirst() else { break }
            if !connection.start(request) { queue.requeue(request) }
        }
        if !queue.isEmpty { openConnectionsIfNeeded() }
    }

    private func openConnectionsIfNeeded() {
        let connecting = connections.count(where: { $0.state == .connecting })
        let live = connections.count(where: { $0.state == .connecting || $0.state == .ready })
        // A connecting connection will take at least one request.
        var wanted = min(configuration.connectionsPerPool - live, queue.count - connecting)
        if failures > 0 {
            guard connecting == 0 else { return }  // one probe at a time while failing
            wanted = min(wanted, 1)
        }
        guard wanted > 0 else { return }
        let now = ContinuousClock.now
        guard now >= nextAttempt else {
            if reconnectTimer == nil {
                // Pools live as long as their client; shutdown cancels the timer.
                reconnectTimer = loop.schedule(after: now.duration(to: nextAttempt)) { [self] in
                    reconnectTimer = nil
                    pump()
                }
            }
            return
        }
        for _ in 0..<wanted { openConnection() }
    }

    private func openConnection() {
        nextConnectionID += 1
        counters.connectionsOpened.add(1, ordering: .relaxed)
        do {
            let connection = try APNsConnection(
                id: nextConnectionID, environment: key.environment, context: context, configuration: configuration,
                loop: loop, pool: self)
            connections.append(connection)
        } catch {
            recordFailure(
                APNsClientError(.connection, "cannot start a connection to \(key.environment)", underlying: error))
        }
    }

    /// A connection attempt failed: back off, and fail the waiting requests when
    /// nothing is left that could take them.
    private func recordFailure(_ failure: APNsClientError) {
        counters.connectionFailures.add(1, ordering: .relaxed)
        failures += 1
        let delay = configuration.backoff.delay(afterFailures: failures)
        nextAttempt = .now + delay
        logger.warning(
            "connection to \(key.environment) failed; next attempt in \(delay)",
            metadata: ["apns.error": failure.description, "apns.failures": String(failures)])
        let live = connections.contains { $0.state == .connecting || $0.state == .ready }
        if !live {
            for request in queue.removeAll() { request.fail(failure) }
        }
    }

    /// The error a waiting request gets for a connection that never worked.
    static func classify(_ error: (any Error)?, duringConnect: Bool, environment: APNsEnvironment) -> APNsClientError {
        if let tls = error as? TLSError {
            switch tls.code {
            case .certificateVerification:
                return APNsClientError(
                    .untrustedServer, "the certificate of \(environment) did not verify", underlying: tls)
            case .alpn:
                return APNsClientError(.untrustedServer, "\(environment) did not agree to HTTP/2", underlying: tls)
            default: break
            }
        }
        if let error = error as? APNsClientError { return error }
        let what = duringConnect ? "cannot connect to" : "the connection closed before any answer from"
        return APNsClientError(.connection, "\(what) \(environment)", underlying: error)
    }
}

/// Which pool a request belongs to.
struct APNsPoolKey: Hashable {
    let credentialID: String
    let environment: APNsEnvironment
}
