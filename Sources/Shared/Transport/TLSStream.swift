import COpenSSL
import CShims
import Foundation

/// Receives a `TLSStream`'s events on its event loop's thread.
public protocol TLSStreamDelegate: AnyObject {
    /// The handshake finished (certificate verified, ALPN agreed).
    func streamDidConnect(_ stream: TLSStream)
    /// Decrypted bytes arrived. The buffer is valid only during the call.
    func stream(_ stream: TLSStream, didReceive bytes: UnsafeRawBufferPointer)
    /// Everything written so far has been handed to the kernel: a good moment to
    /// produce more output.
    func streamDidDrain(_ stream: TLSStream)
    /// The stream is closed; `error` is nil for an orderly close by either side.
    func stream(_ stream: TLSStream, didCloseWith error: TLSError?)
}

/// A non-blocking TCP connection with TLS, driven by one `EventLoop`.
///
/// Confined to its loop's thread: every method must be called there. Outgoing
/// bytes are buffered without limit here; the protocol on top (HTTP/2 flow
/// control, bounded request queues) is what bounds them.
public final class TLSStream: EventLoopSelectable {
    public let loop: EventLoop
    public weak var delegate: (any TLSStreamDelegate)?
    /// The negotiated ALPN protocol, once connected.
    public private(set) var alpnProtocol: String?

    private enum State { case resolving, connecting, handshaking, open, closed }
    private var state: State
    private var fd: Int32 = -1
    private let ssl: OpaquePointer
    private let context: TLSContext
    private let requiredALPN: String?
    private var outbound: [UInt8] = []
    private var outboundOffset = 0
    private var watchingWrite = false
    /// `SSL_read` stopped for want of a write (e.g. a TLS 1.3 KeyUpdate answer into
    /// a full socket). With read-ahead, records may already sit inside OpenSSL while
    /// the socket has nothing to read, so the read resumes when the socket is writable.
    private var readWantsWrite = false
    private var connectTimer: EventLoop.TimerID?
    /// Connecting: the resolved addresses not tried yet, the timer that gives up on
    /// the current one, and why the last one failed.
    private var untriedAddresses: ArraySlice<[UInt8]> = []
    private var addressTimer: EventLoop.TimerID?
    private var lastConnectFailure = "no address"
    private let addressAttemptLimit: Duration
    private var readBuffer = [UInt8](repeating: 0, count: 16 * 1024)

    /// Opens a client connection; call on `loop`. Resolves `host` afresh (off the
    /// loop), connects, and verifies the server's certificate for `host`. The
    /// delegate then hears `streamDidConnect` or `didCloseWith` (`.resolve`,
    /// `.connect`, `.certificateVerification`, `.alpn`, `.timeout`…).
    ///
    /// A host name with several addresses (Apple's have many, of both families) is
    /// tried address by address, the families alternating (RFC 8305): one that
    /// refuses, or has not answered within `addressAttemptLimit(for:)`, gives way to
    /// the next, so one unreachable address (a broken IPv6 route, say) does not
    /// fail the connection. `timeout` bounds the whole, TLS handshake included.
    public convenience init(
        connectingTo host: String, port: Int, context: TLSContext, requireALPN: String?, timeout: Duration,
        loop: EventLoop, delegate: any TLSStreamDelegate
    ) throws(TLSError) {
        try self.init(
            connectingTo: host, port: port, context: context, requireALPN: requireALPN, timeout: timeout, loop: loop,
            delegate: delegate, resolver: { host, port in TLSStream.resolve(host: host, port: port) })
    }

    /// `resolver` stands in for the system's (blocking, called off the loop): tests
    /// give it addresses that fail in chosen ways.
    init(
        connectingTo host: String, port: Int, context: TLSContext, requireALPN: String?, timeout: Duration,
        loop: EventLoop, delegate: any TLSStreamDelegate,
        resolver: @escaping @Sendable (String, Int) -> Result<[[UInt8]], TLSError>
    ) throws(TLSError) {
        guard let ssl = SSL_new(context.context) else { throw TLSError(.configuration, TLSError.openSSLReason()) }
        self.loop = loop
        self.ssl = ssl
        self.context = context
        self.requiredALPN = requireALPN
        self.delegate = delegate
        self.state = .resolving
        self.addressAttemptLimit = Self.addressAttemptLimit(for: timeout)
        pg_shim_ssl_set_nonblocking_modes(ssl)
        SSL_set_read_ahead(ssl, 1)  // whole socket reads, not a header then a body per record
        // SNI, and the certificate must name this host.
        _ = pg_shim_ssl_set_sni(ssl, host)
        _ = SSL_set1_host(ssl, host)
        SSL_set_connect_state(ssl)
        connectTimer = loop.schedule(after: timeout) { [weak self] in
            self?.finish(TLSError(.timeout, "no TLS connection to \(host):\(port) within \(timeout)"))
        }
        let stream = UncheckedTransfer(self)
        DispatchQueue.global().async {
            let resolved = resolver(host, port)
            loop.execute { stream.value.connect(resolved) }
        }
    }

    /// Wraps a socket accepted by a server; the handshake runs from the loop's next
    /// readable event, so the caller can finish setting up first. Call on `loop`.
    public init(acceptedSocket fd: Int32, context: TLSContext, loop: EventLoop, delegate: any TLSStreamDelegate)
        throws(TLSError)
    {
        guard let ssl = SSL_new(context.context) else { throw TLSError(.configuration, TLSError.openSSLReason()) }
        self.loop = loop
        self.fd = fd
        self.ssl = ssl
        self.context = context
        self.requiredALPN = nil
        self.delegate = delegate
        self.state = .handshaking
        self.addressAttemptLimit = .zero
        Self.configureSocket(fd)
        SSL_set_fd(ssl, fd)
        pg_shim_ssl_set_nonblocking_modes(ssl)
        SSL_set_read_ahead(ssl, 1)
        SSL_set_accept_state(ssl)
        // The handshake starts on the first readable event, never here: on another
        // core the client can answer our first flight while this call is still
        // inside SSL_do_handshake, so the handshake (and the client's first
        // requests) could complete before the caller has attached its delegate.
        loop.register(fd, interest: .read, handler: self)
    }

    /// Continues on the loop once the host name is resolved.
    private func connect(_ resolved: Result<[[UInt8]], TLSError>) {
        guard state == .resolving else { return }  // closed or timed out meanwhile
        switch resolved {
        case .failure(let error): finish(error)
        case .success(let addresses):
            untriedAddresses = Self.alternatingFamilies(addresses)[...]
            state = .connecting
            connectToNextAddress()
        }
    }

    /// Starts a TCP connect to the next untried address; fails the stream when none
    /// is left. An address refused at once is skipped here.
    private func connectToNextAddress() {
        while let address = untriedAddresses.popFirst() {
            let family = address.count == MemoryLayout<sockaddr_in>.size ? AF_INET : AF_INET6
            let candidate = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard candidate >= 0 else {
                lastConnectFailure = String(cString: strerror(errno))
                continue
            }
            Self.configureSocket(candidate)
            let status = address.withUnsafeBytes {
                Foundation.connect(
                    candidate, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t($0.count))
            }
            guard status == 0 || errno == EINPROGRESS else {
                lastConnectFailure = String(cString: strerror(errno))
                Foundation.close(candidate)
                continue
            }
            fd = candidate
            SSL_set_fd(ssl, fd)
            loop.register(fd, interest: [.read, .write], handler: self)
            watchingWrite = true
            // The last address has what is left of the whole connect timeout.
            if !untriedAddresses.isEmpty {
                addressTimer = loop.schedule(after: addressAttemptLimit) { [weak self] in
                    guard let self else { return }
                    addressTimer = nil
                    addressFailed("no answer within \(addressAttemptLimit)")
                }
            }
            return
        }
        finish(TLSError(.connect, lastConnectFailure))
    }

    /// Stops the current address's own time limit (it connected, failed, or the stream ends).
    private func cancelAddressTimer() {
        if let timer = addressTimer { loop.cancel(timer) }
        addressTimer = nil
    }

    /// The current address's TCP connect failed: the next one is tried, if any.
    private func addressFailed(_ reason: String) {
        guard state == .connecting else { return }
        lastConnectFailure = reason
        cancelAddressTimer()
        if fd >= 0 {
            loop.unregister(fd)
            Foundation.close(fd)
            fd = -1
        }
        watchingWrite = false
        connectToNextAddress()
    }

    /// How long one address may take to accept the TCP connection before the next is
    /// tried: 2 s (a connection across the world answers well within it), but at most
    /// half of `timeout`, so that a second address is still tried.
    static func addressAttemptLimit(for timeout: Duration) -> Duration {
        min(.seconds(2), timeout / 2)
    }

    /// `addresses` reordered so that the address families alternate, starting with
    /// the resolver's first choice (RFC 8305, section 4); otherwise in its order.
    static func alternatingFamilies(_ addresses: [[UInt8]]) -> [[UInt8]] {
        guard let first = addresses.first else { return [] }
        var same = addresses.filter { $0.count == first.count }
        var other = addresses.filter { $0.count != first.count }
        var ordered: [[UInt8]] = []
        ordered.reserveCapacity(addresses.count)
        same.reverse()
        other.reverse()
        while !same.isEmpty || !other.isEmpty {
            if let next = same.popLast() { ordered.append(next) }
            if let next = other.popLast() { ordered.append(next) }
        }
        return ordered
    }

    deinit {
        SSL_free(ssl)
        if fd >= 0 { Foundation.close(fd) }
    }

    public var isOpen: Bool { state == .open }

    /// Queues `bytes` and writes as much as the socket takes now.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        enqueue(bytes)
        flushWrites()
    }

    /// Queues `bytes` without writing them yet: many small pieces (HTTP/2 frames)
    /// queued before one `flushWrites()` share TLS records and system calls.
    public func enqueue(_ bytes: UnsafeRawBufferPointer) {
        guard state != .closed else { return }
        outbound.append(contentsOf: bytes)
    }

    /// Writes what is queued, as much as the socket takes now; nothing to do
    /// (and no `streamDidDrain`) when nothing is queued.
    public func flushWrites() {
        guard state == .open, outboundOffset < outbound.count else { return }
        flush()
    }

    public func write(_ bytes: [UInt8]) { bytes.withUnsafeBytes { write($0) } }

    /// Bytes written but not yet taken by the kernel.
    public var pendingWriteBytes: Int { outbound.count - outboundOffset }

    /// Closes the connection (TLS close_notify, best effort) and tells the delegate.
    /// Closes the connection and tells the delegate at once. An open connection is
    /// closed gracefully: what was written is still sent, then TLS close_notify and
    /// a TCP half-close, and what the peer still sends is read and dropped until it
    /// closes too (at most `lingerLimit`). Closing a socket with unread input would
    /// make the kernel send a reset, which can destroy our last frames (a GOAWAY)
    /// before the peer reads them.
    public func close() {
        guard state != .closed else { return }
        finish(nil, graceful: state == .open)
    }

    /// How long a closed connection may linger to drain its peer.
    public static let lingerLimit: Duration = .seconds(2)

    // MARK: EventLoopSelectable

    public func readable() {
        if lingering { return drainLingering() }
        switch state {
        case .connecting: finishTCPConnect()
        case .handshaking: continueHandshake()
        case .open: readAvailable()
        case .resolving, .closed: break
        }
    }

    public func writable() {
        if lingering { return finishLingeringWrites() }
        switch state {
        case .connecting: finishTCPConnect()
        case .handshaking: continueHandshake()
        case .open:
            flush()
            if readWantsWrite {
                readWantsWrite = false
                readAvailable()
            }
        case .resolving, .closed: break
        }
    }

    public func hangUp() {
        if lingering { return releaseSocket() }
        if state == .connecting {
            let error = socketError()
            return addressFailed(error == 0 ? "connection closed by peer" : String(cString: strerror(error)))
        }
        if state == .open {
            readAvailable()  // deliver what arrived before the hang-up
        }
        if state != .closed {
            finish(TLSError(.closed, "connection closed by peer"))
        }
    }

    // MARK: Internals

    private static func configureSocket(_ fd: Int32) {
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, socklen_t(MemoryLayout<Int32>.size))
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }

    /// The pending error of the connecting socket (`SO_ERROR`), 0 if none.
    private func socketError() -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        return error
    }

    private func finishTCPConnect() {
        let error = socketError()
        guard error == 0 else {
            addressFailed(String(cString: strerror(error)))
            return
        }
        cancelAddressTimer()
        state = .handshaking
        continueHandshake()
    }

    private func continueHandshake() {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            handshakeDone()
            return
        }
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: watchWrite(false)
        case SSL_ERROR_WANT_WRITE: watchWrite(true)
        default:
            let verify = SSL_get_verify_result(ssl)
            if verify != X509_V_OK {
                let reason = String(cString: X509_verify_cert_error_string(verify))
                finish(TLSError(.certificateVerification, reason))
            } else {
                finish(TLSError(.handshake, TLSError.openSSLReason()))
            }
        }
    }

    private func handshakeDone() {
        if let timer = connectTimer {
            loop.cancel(timer)
            connectTimer = nil
        }
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        if let data, length > 0 {
            alpnProtocol = String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
        }
        if let requiredALPN, alpnProtocol != requiredALPN {
            finish(TLSError(.alpn, "server did not agree to \(requiredALPN)"))
            return
        }
        state = .open
        delegate?.streamDidConnect(self)
        guard state == .open else { return }
        flush()
        readAvailable()  // data may already sit in OpenSSL's buffer
    }

    private func readAvailable() {
        while state == .open {
            var count = 0
            ERR_clear_error()
            let result = readBuffer.withUnsafeMutableBytes { SSL_read_ex(ssl, $0.baseAddress, $0.count, &count) }
            if result == 1 {
                readBuffer.withUnsafeBytes {
                    delegate?.stream(self, didReceive: UnsafeRawBufferPointer(rebasing: $0[0..<count]))
                }
                continue
            }
            switch SSL_get_error(ssl, result) {
            case SSL_ERROR_WANT_READ: return
            case SSL_ERROR_WANT_WRITE:
                readWantsWrite = true
                watchWrite(true)
                return
            case SSL_ERROR_ZERO_RETURN: finish(nil)
            default: finish(TLSError(.io, "read failed: \(TLSError.openSSLReason())"))
            }
            return
        }
    }

    private func flush() {
        while state == .open && outboundOffset < outbound.count {
            var written = 0
            ERR_clear_error()
            let result = outbound.withUnsafeBytes { bytes in
                SSL_write_ex(ssl, bytes.baseAddress! + outboundOffset, bytes.count - outboundOffset, &written)
            }
            if result == 1 {
                outboundOffset += written
                continue
            }
            switch SSL_get_error(ssl, result) {
            case SSL_ERROR_WANT_WRITE, SSL_ERROR_WANT_READ:
                watchWrite(true)
                return
            default:
                finish(TLSError(.io, "write failed: \(TLSError.openSSLReason())"))
                return
            }
        }
        guard state == .open else { return }
        outbound.removeAll(keepingCapacity: outbound.capacity <= 1 << 20)
        outboundOffset = 0
        watchWrite(false)
        delegate?.streamDidDrain(self)
    }

    private func watchWrite(_ wanted: Bool) {
        guard wanted != watchingWrite, state != .closed else { return }
        watchingWrite = wanted
        loop.reregister(fd, interest: wanted ? [.read, .write] : .read)
    }

    private func finish(_ error: TLSError?, graceful: Bool = false) {
        guard state != .closed else { return }
        state = .closed
        if let timer = connectTimer { loop.cancel(timer) }
        cancelAddressTimer()
        if graceful && fd >= 0 {
            startLingering()
        } else {
            releaseSocket()
        }
        delegate?.stream(self, didCloseWith: error)
    }

    // MARK: Lingering close (loop thread; the loop's handler table keeps us alive)

    private var lingering = false
    private var lingerTimer: EventLoop.TimerID?

    private func startLingering() {
        lingering = true
        lingerTimer = loop.schedule(after: Self.lingerLimit) { [weak self] in self?.releaseSocket() }
        finishLingeringWrites()
    }

    /// Sends what is still buffered, then close_notify and a TCP half-close.
    private func finishLingeringWrites() {
        while outboundOffset < outbound.count {
            var written = 0
            ERR_clear_error()
            let result = outbound.withUnsafeBytes { bytes in
                SSL_write_ex(ssl, bytes.baseAddress! + outboundOffset, bytes.count - outboundOffset, &written)
            }
            guard result == 1 else {
                let code = SSL_get_error(ssl, result)
                if code == SSL_ERROR_WANT_WRITE || code == SSL_ERROR_WANT_READ {
                    loop.reregister(fd, interest: [.read, .write])
                    return
                }
                return releaseSocket()
            }
            outboundOffset += written
        }
        outbound = []
        outboundOffset = 0
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
        shutdown(fd, Int32(SHUT_WR))
        loop.reregister(fd, interest: .read)
        drainLingering()
    }

    /// Reads and drops what the peer still sends; its close ends the linger.
    private func drainLingering() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return }
            return releaseSocket()  // EOF or error
        }
    }

    private func releaseSocket() {
        if let timer = lingerTimer {
            loop.cancel(timer)
            lingerTimer = nil
        }
        lingering = false
        outbound = []
        outboundOffset = 0
        guard fd >= 0 else { return }
        loop.unregister(fd)
        Foundation.close(fd)
        fd = -1
    }

    /// Resolves `host` to socket addresses (blocking; called off the loop).
    private static func resolve(host: String, port: Int) -> Result<[[UInt8]], TLSError> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            return .failure(TLSError(.resolve, "cannot resolve \(host): \(String(cString: gai_strerror(status)))"))
        }
        defer { freeaddrinfo(list) }
        var addresses: [[UInt8]] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let address = entry.pointee.ai_addr {
                addresses.append(Array(UnsafeRawBufferPointer(start: address, count: Int(entry.pointee.ai_addrlen))))
            }
            cursor = entry.pointee.ai_next
        }
        return .success(addresses)
    }
}

/// Carries a loop-confined object through a closure that hops back to its loop.
private struct UncheckedTransfer<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
