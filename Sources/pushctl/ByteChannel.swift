import COpenSSL
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A connected byte stream that blocks: pushctl sends one request at a time, so
/// its only task may wait in `connect`, `send` and `recv` (bounded by `timeout`).
protocol ByteChannel: AnyObject {
    func write(_ bytes: [UInt8]) throws(ChannelError)
    /// Up to `buffer.count` bytes; 0 at the end of the stream.
    func read(into buffer: inout [UInt8]) throws(ChannelError) -> Int
    func close()
}

/// Why a connection failed, in words for the operator.
struct ChannelError: Error {
    let reason: String

    static func system(_ what: String, _ code: Int32 = errno) -> ChannelError {
        code == EAGAIN || code == EWOULDBLOCK || code == EINPROGRESS
            ? ChannelError(reason: "\(what): timed out")
            : ChannelError(reason: "\(what): \(String(cString: strerror(code)))")
    }
}

/// A TCP connection to the first of `host`'s addresses that accepts one.
final class SocketChannel: ByteChannel {
    let descriptor: Int32

    init(host: String, port: Int, timeout: Duration) throws(ChannelError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &list)
        guard resolved == 0, let list else {
            throw ChannelError(reason: "cannot resolve \(host): \(String(cString: gai_strerror(resolved)))")
        }
        defer { freeaddrinfo(list) }
        var lastFailure = ChannelError(reason: "\(host) has no address")
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let address = entry?.pointee {
            entry = address.ai_next
            let descriptor = socket(address.ai_family, address.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else {
                lastFailure = .system("socket")
                continue
            }
            // Linux bounds `connect` by the send timeout as well.
            Self.setTimeout(descriptor, SO_SNDTIMEO, timeout)
            Self.setTimeout(descriptor, SO_RCVTIMEO, timeout)
            if connect(descriptor, address.ai_addr, address.ai_addrlen) == 0 {
                self.descriptor = descriptor
                return
            }
            lastFailure = .system("connect")
            Glibc.close(descriptor)
        }
        throw lastFailure
    }

    private static func setTimeout(_ descriptor: Int32, _ option: Int32, _ timeout: Duration) {
        let (seconds, attoseconds) = timeout.components
        var value = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        setsockopt(descriptor, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    func write(_ bytes: [UInt8]) throws(ChannelError) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw .system("send")
            }
            offset += sent
        }
    }

    func read(into buffer: inout [UInt8]) throws(ChannelError) -> Int {
        while true {
            let received = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if received >= 0 { return received }
            if errno != EINTR { throw .system("recv") }
        }
    }

    func close() { Glibc.close(descriptor) }
}

/// TLS over a `SocketChannel`: the server's certificate verified against the
/// system's trust store (or `SSL_CERT_FILE`) and for `host`.
final class TLSChannel: ByteChannel {
    private let socket: SocketChannel
    private let context: OpaquePointer
    private let ssl: OpaquePointer

    init(socket: SocketChannel, host: String) throws(ChannelError) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw Self.failure("TLS setup") }
        // Configured before `SSL_new`, which copies the verify mode and options.
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        // A peer that closes without close_notify ends the stream: the response's own
        // framing (Content-Length, chunks) says whether anything is missing.
        // (SSL_OP_IGNORE_UNEXPECTED_EOF, 1 << 7: a macro Swift cannot import.)
        SSL_CTX_set_options(context, 1 << 7)
        guard SSL_CTX_set_default_verify_paths(context) == 1, let ssl = SSL_new(context) else {
            let failure = Self.failure("TLS setup")
            SSL_CTX_free(context)
            throw failure
        }
        (self.socket, self.context, self.ssl) = (socket, context, ssl)
        // SSL_set_tlsext_host_name is a macro over SSL_ctrl.
        _ = host.withCString {
            SSL_ctrl(
                ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name), UnsafeMutableRawPointer(mutating: $0)
            )
        }
        guard SSL_set1_host(ssl, host) == 1, SSL_set_fd(ssl, socket.descriptor) == 1 else {
            throw Self.failure("TLS setup")
        }
        guard SSL_connect(ssl) == 1 else {
            let verdict = SSL_get_verify_result(ssl)
            if verdict != X509_V_OK {
                throw ChannelError(
                    reason:
                        "TLS handshake: certificate rejected (\(String(cString: X509_verify_cert_error_string(verdict))))"
                )
            }
            throw Self.failure("TLS handshake")
        }
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    /// OpenSSL's first queued error, or errno's when it has none.
    private static func failure(_ what: String) -> ChannelError {
        let code = ERR_get_error()
        guard code != 0 else { return .system(what) }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &text, text.count)
        let message = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return ChannelError(reason: "\(what): \(message)")
    }

    func write(_ bytes: [UInt8]) throws(ChannelError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
            guard written > 0 else { throw Self.failure("TLS write") }
            offset += Int(written)
        }
    }

    func read(into buffer: inout [UInt8]) throws(ChannelError) -> Int {
        let count = buffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
        if count > 0 { return Int(count) }
        if SSL_get_error(ssl, count) == SSL_ERROR_ZERO_RETURN { return 0 }
        throw Self.failure("TLS read")
    }

    func close() {
        _ = SSL_shutdown(ssl)
        socket.close()
    }
}
