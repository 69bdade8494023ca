import CMicroHTTPD
import CShims
import Foundation
import Synchronization

public struct HTTPServerError: Error, CustomStringConvertible {
    public let description: String
}

/// An HTTP/1.1 server on GNU libmicrohttpd: epoll with an internal thread pool,
/// keep-alive, bounded headers and bodies, per-connection timeouts and a global
/// connection cap.
///
/// With `Configuration.eventLoop` set, the daemon has no threads of its own and runs
/// on that loop instead (see `HTTPDaemonDriver`).
///
/// libmicrohttpd's threads only parse and write. When a request is complete its
/// connection is suspended and handed to the `HTTPHandler` (as a Swift task unless
/// the handler answers through a callback of its own), and the connection is
/// resumed with the response, so a handler waiting on Redis never holds one of the
/// server's threads.
public final class HTTPServer: Sendable {
    public struct Configuration: Sendable {
        public var address: ListenAddress
        public var threads: Int
        public var connectionLimit: Int
        /// The most connections one peer address may hold at once (0: no limit);
        /// past it libmicrohttpd closes new ones at once. Only for a server that
        /// clients reach directly: behind a proxy every connection has its address.
        public var connectionsPerIP: Int
        public var connectionTimeoutSeconds: Int
        /// The most bytes of path, query and header fields a request may carry: past
        /// it the handler's `rejected(_:_:)` answers, in the API's own error
        /// format (414 when the path and query alone pass half of it, else 431).
        public var headerLimit: Int
        /// Each connection's memory pool, which holds the request line and headers
        /// as read (and a record of each field), then the answer's head; past it
        /// libmicrohttpd answers 431 or 414 itself, with an HTML body no hook of
        /// Debian's 0.9.75 can replace, or, with too little left for the answer,
        /// closes the connection unanswered. So it is kept three times `headerLimit`,
        /// and a head that takes more than two thirds of it is refused by the handler
        /// (`HTTPRequestHead.rejection`). libmicrohttpd clears it before every request
        /// (keep-alive included): 24 KB costs three quarters of the clearing of 32 KB.
        public var headerMemoryLimit: Int
        /// The most bytes of request bodies held while they arrive, all connections
        /// together: past it a request is answered `unavailable` (503) and its body
        /// dropped. Without it, slow uploads of bodies each under their own limit
        /// (the App API's is about 1.1 MB) on thousands of connections exhaust memory.
        public var bodyMemoryLimit: Int
        /// The longest a request's body may take to arrive, from its head on: past
        /// it the connection is closed (a body trickling in a byte at a time is never
        /// idle long enough for `connectionTimeoutSeconds`).
        public var bodyTimeout: Duration
        /// How much of a body over its limit is read and dropped before the answer: a
        /// client that sends a body a little too large gets its 413 once it has sent it
        /// (closing with the body unread could reset the connection before the client
        /// reads the answer), while one declaring or streaming far more is answered at
        /// once and its connection closed, instead of being read for `bodyTimeout`.
        public var oversizedBodyDrain: Int
        /// The loop that runs the daemon instead of its own `threads` (which are then
        /// not started): handlers answering from this loop's thread (a Redis
        /// multiplexer on it) then cost no thread hand-off at all.
        public var eventLoop: EventLoop?

        public init(
            address: ListenAddress, threads: Int = 2, connectionLimit: Int = 10_000, connectionsPerIP: Int = 0,
            connectionTimeoutSeconds: Int = 30,
            headerLimit: Int = 8 * 1024, headerMemoryLimit: Int = 24 * 1024, bodyMemoryLimit: Int = 256 << 20,
            bodyTimeout: Duration = .seconds(60), oversizedBodyDrain: Int = 1 << 20, eventLoop: EventLoop? = nil
        ) {
            self.bodyTimeout = bodyTimeout
            self.oversizedBodyDrain = oversizedBodyDrain
            self.eventLoop = eventLoop
            self.address = address
            self.threads = threads
            self.connectionLimit = connectionLimit
            self.connectionsPerIP = connectionsPerIP
            self.connectionTimeoutSeconds = connectionTimeoutSeconds
            self.headerLimit = headerLimit
            self.headerMemoryLimit = headerMemoryLimit
            self.bodyMemoryLimit = bodyMemoryLimit
        }
    }

    let handler: any HTTPHandler
    let logger: Logger
    /// Runs the daemon on `Configuration.eventLoop`; nil when it has threads of its own.
    let driver: HTTPDaemonDriver?
    let configuration: Configuration
    private let state = Mutex(State())
    /// Requests begun and not yet completed (for draining on shutdown).
    let inFlight = Atomic<Int>(0)
    /// Connections open (`httpServerConnection`): near `connectionLimit`, new ones wait.
    let connections = Atomic<Int>(0)
    public var openConnections: Int { connections.load(ordering: .relaxed) }
    /// Requests whose head arrived and whose answer has not gone out.
    public var requestsInFlight: Int { inFlight.load(ordering: .relaxed) }
    /// Bytes of request bodies held while they arrive (`bodyMemoryLimit`).
    public var heldBodyBytes: Int { bodyMemory.load(ordering: .relaxed) }
    /// Connections waiting for their handlers' answers.
    let suspended = SuspendedConnections()
    /// libmicrohttpd's server-level warnings, at most one per 5 s.
    let libraryLog: ThrottledLog
    /// Set once `shutdown` has stopped accepting: answers then close their connections.
    private let draining = Atomic<Bool>(false)
    var isDraining: Bool { draining.load(ordering: .relaxed) }
    /// Bytes of request bodies being received, all connections together (`bodyMemoryLimit`).
    let bodyMemory = Atomic<Int>(0)

    /// The part of `bodyMemory` held by bodies allowed past `largeBodySize`.
    let largeBodyMemory = Atomic<Int>(0)

    /// Bodies allowed more than this (the App API's batches, about 1.1 MB) share half
    /// the body memory between them, so a flood of them cannot starve the small ones
    /// (Web Push, 8 KB).
    static let largeBodySize = 64 * 1024

    /// The least a body's reservation grows by, and the most a declared length alone
    /// reserves.
    static let reservationStep = 64 * 1024
    /// The least a chunked body's (no declared length) reservation grows by: its first
    /// bytes would otherwise hold a whole step, so a few thousand connections each
    /// sending one small chunk would fill the body memory.
    static let chunkedReservationStep = 4 * 1024

    /// Grows `context`'s reservation so its body can hold `needed` bytes: to twice
    /// `needed` (as the array would grow), at least 64 KiB (4 KiB for a chunked body),
    /// but no more than its declared `Content-Length` (a Web Push body is reserved
    /// whole at once) nor its limit; false,
    /// reserving nothing, when that passes the server's body memory. A declared length
    /// alone reserves no more than 64 KiB, so a client cannot hold a megabyte of the
    /// budget by sending one byte. The body's capacity follows the reservation.
    func reserveBodyCapacity(_ needed: Int, for context: HTTPRequestContext) -> Bool {
        let least = context.declaredBodyLength == nil ? Self.chunkedReservationStep : Self.reservationStep
        let step = max(2 * needed, least)
        let target = min(max(needed, min(context.declaredBodyLength ?? step, step)), context.bodyLimit)
        let bytes = target - context.reservedBodyBytes
        let large = context.bodyLimit > Self.largeBodySize
        if large {
            let total = largeBodyMemory.add(bytes, ordering: .relaxed).newValue
            guard total <= configuration.bodyMemoryLimit / 2 else {
                largeBodyMemory.subtract(bytes, ordering: .relaxed)
                return false
            }
        }
        guard bodyMemory.add(bytes, ordering: .relaxed).newValue <= configuration.bodyMemoryLimit else {
            bodyMemory.subtract(bytes, ordering: .relaxed)
            if large { largeBodyMemory.subtract(bytes, ordering: .relaxed) }
            return false
        }
        context.body.reserveCapacity(target)
        context.reservedBodyBytes = target
        return true
    }

    /// Gives back what `context`'s body held (handed to the handler, dropped, or its
    /// request ended) and drops it.
    func releaseBody(of context: HTTPRequestContext) {
        let bytes = context.reservedBodyBytes
        context.body = []
        context.reservedBodyBytes = 0
        guard bytes > 0 else { return }
        bodyMemory.subtract(bytes, ordering: .relaxed)
        if context.bodyLimit > Self.largeBodySize { largeBodyMemory.subtract(bytes, ordering: .relaxed) }
    }

    /// Raw pointers are not Sendable; these are only read under the lock, and
    /// `stop()` takes them out before freeing, so no two threads free them.
    private struct State: @unchecked Sendable {
        var daemon: OpaquePointer?
        var port = 0
        var logTarget: UnsafeMutablePointer<pg_shim_mhd_log_target>?
        var retainedSelf: Unmanaged<HTTPServer>?
    }

    public init(configuration: Configuration, handler: any HTTPHandler, logger: Logger) {
        self.configuration = configuration
        self.handler = handler
        self.logger = logger
        let libraryLog = ThrottledLog(logger: logger, interval: .seconds(5))
        self.libraryLog = libraryLog
        driver = configuration.eventLoop.map { HTTPDaemonDriver(loop: $0, log: libraryLog) }
    }

    /// The port actually bound (useful when configured with port 0).
    public var port: Int { state.withLock { $0.port } }

    public func start() throws(HTTPServerError) {
        let address = try socketAddress(configuration.address)
        // The daemon's callbacks reach this object through an unretained pointer;
        // keep it alive until the daemon is stopped.
        let retained = Unmanaged.passRetained(self)
        let logTarget = UnsafeMutablePointer<pg_shim_mhd_log_target>.allocate(capacity: 1)
        logTarget.initialize(to: pg_shim_mhd_log_target(handler: httpServerLog, cls: retained.toOpaque()))

        let daemon: OpaquePointer? = address.withUnsafeBytes { raw in
            var options = pg_shim_mhd_options()
            let polling = configuration.eventLoop == nil ? MHD_USE_EPOLL_INTERNAL_THREAD : MHD_USE_EPOLL
            // libmicrohttpd makes an IPv4 socket unless told otherwise, and cannot bind
            // it to an IPv6 address; dual stack, so `[::]` takes IPv4 clients too.
            let family = address.count == MemoryLayout<sockaddr_in6>.size ? MHD_USE_DUAL_STACK.rawValue : 0
            options.flags = UInt32(polling.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue | family)
            options.address = raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)
            options.thread_pool_size = configuration.eventLoop == nil ? UInt32(max(configuration.threads, 1)) : 0
            options.connection_limit = UInt32(configuration.connectionLimit)
            options.per_ip_connection_limit = UInt32(configuration.connectionsPerIP)
            options.connection_timeout_seconds = UInt32(configuration.connectionTimeoutSeconds)
            options.connection_memory_limit = configuration.headerMemoryLimit
            options.listen_backlog = 1024
            options.access_handler = httpServerAccess
            options.access_cls = retained.toOpaque()
            options.completed_handler = httpServerCompleted
            options.completed_cls = retained.toOpaque()
            options.connection_handler = httpServerConnection
            options.connection_cls = retained.toOpaque()
            options.log_target = logTarget
            return pg_shim_mhd_start(&options)
        }
        guard let daemon else {
            retained.release()
            logTarget.deallocate()
            throw HTTPServerError(
                description: "cannot listen on \(configuration.address) (address in use or not local?)")
        }
        let port = Int(pg_shim_mhd_bound_port(daemon))
        driver?.start(daemon)
        state.withLock {
            $0.daemon = daemon
            $0.port = port
            $0.logTarget = logTarget
            $0.retainedSelf = retained
        }
        logger.info(
            "listening", metadata: ["address": ListenAddress(host: configuration.address.host, port: port).description])
    }

    /// Stops accepting connections, lets requests in progress finish (up to
    /// `deadline`), then closes every connection. Idempotent.
    public func shutdown(deadline: Duration = .seconds(10)) async {
        guard let daemon = state.withLock({ $0.daemon }) else { return }
        // Quiescing hands the listening socket to us; libmicrohttpd's threads may still
        // touch it until the daemon is stopped, so it is closed after the stop.
        let listener = if let driver { await driver.quiesce() } else { MHD_quiesce_daemon(daemon) }
        defer { if listener >= 0 { close(listener) } }
        // Stop listening now (the descriptor stays ours until closed): new connections
        // are refused, and a load balancer tries another replica at once, instead of
        // waiting in the backlog, where nobody accepts them, until the drain ends.
        if listener >= 0 { _ = Glibc.shutdown(listener, Int32(SHUT_RD)) }
        draining.store(true, ordering: .relaxed)
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: deadline)
        while inFlight.load(ordering: .acquiring) > 0 && clock.now < end {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let remaining = inFlight.load(ordering: .acquiring)
        if remaining > 0 { logger.warning("closing with requests in progress", metadata: ["requests": "\(remaining)"]) }
        await stop()
    }

    private func stop() async {
        let taken = state.withLock { state -> State in
            let taken = state
            state = State()
            return taken
        }
        guard let daemon = taken.daemon else { return }
        let cutOff = suspended.releaseAll(answering: handler.unavailable)
        if cutOff > 0 {
            logger.warning("answered unavailable at shutdown", metadata: ["requests": "\(cutOff)"])
            // The resumed connections' 503s are written by the daemon: give it a moment
            // (stopping it closes every connection without writing what is queued).
            driver?.connectionResumed()
            let end = ContinuousClock.now + .milliseconds(500)
            while inFlight.load(ordering: .acquiring) > 0 && ContinuousClock.now < end {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        if let driver {
            await driver.stop()
        } else {
            MHD_stop_daemon(daemon)
        }
        taken.logTarget?.deinitialize(count: 1)
        taken.logTarget?.deallocate()
        taken.retainedSelf?.release()
    }

    private func socketAddress(_ listen: ListenAddress) throws(HTTPServerError) -> [UInt8] {
        guard let bytes = CIDR.parseAddress(listen.host) else {
            throw HTTPServerError(description: "listen host must be an IP address: \(listen.host)")
        }
        let port = in_port_t(UInt16(listen.port).bigEndian)
        if bytes.count == 4 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port
            withUnsafeMutableBytes(of: &address.sin_addr) { $0.copyBytes(from: bytes) }
            return withUnsafeBytes(of: &address) { Array($0) }
        }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = port
        withUnsafeMutableBytes(of: &address.sin6_addr) { $0.copyBytes(from: bytes) }
        return withUnsafeBytes(of: &address) { Array($0) }
    }
}
