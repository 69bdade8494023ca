import COpenSSL
import CShims
import Foundation

public struct TLSError: Error, CustomStringConvertible, Equatable {
    public enum Code: Sendable, Equatable {
        case configuration
        case resolve
        case connect
        case handshake
        /// The peer's certificate did not verify (unknown CA, wrong host name, expired).
        case certificateVerification
        /// The peer did not agree to HTTP/2 through ALPN.
        case alpn
        case io
        case timeout
        case closed
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "TLS \(code): \(reason)" }

    /// The reason of the most recent OpenSSL error on this thread, and clears the queue.
    static func openSSLReason() -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return "unknown OpenSSL error" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// A configured `SSL_CTX`. Immutable after creation; OpenSSL allows creating
/// `SSL` objects from one context on many threads, which is all we do with it.
public final class TLSContext: @unchecked Sendable {
    let context: OpaquePointer
    /// ALPN protocols in wire format (length-prefixed), kept alive for the server's select callback.
    let alpnWire: [UInt8]
    public let isServer: Bool

    private init(context: OpaquePointer, alpn: [String], isServer: Bool) {
        self.context = context
        self.alpnWire = alpn.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
        self.isServer = isServer
    }

    deinit { SSL_CTX_free(context) }

    /// A client context that verifies servers against the system CAs plus
    /// `extraCAFile`, TLS 1.2 or newer, offering `alpn`. Verification cannot be disabled.
    public static func client(extraCAFile: String?, alpn: [String]) throws(TLSError) -> TLSContext {
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw TLSError(.configuration, TLSError.openSSLReason())
        }
        let tls = TLSContext(context: context, alpn: alpn, isServer: false)
        guard pg_shim_ssl_ctx_set_min_tls12(context) == 1 else {
            throw TLSError(.configuration, TLSError.openSSLReason())
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        // A missing system bundle is not fatal when an explicit CA file is given.
        _ = SSL_CTX_set_default_verify_paths(context)
        if let extraCAFile, SSL_CTX_load_verify_locations(context, extraCAFile, nil) != 1 {
            throw TLSError(.configuration, "cannot load CA file \(extraCAFile): \(TLSError.openSSLReason())")
        }
        if !alpn.isEmpty {
            let status = tls.alpnWire.withUnsafeBufferPointer {
                SSL_CTX_set_alpn_protos(context, $0.baseAddress, UInt32($0.count))
            }
            guard status == 0 else { throw TLSError(.configuration, "cannot set ALPN") }
        }
        return tls
    }

    /// A server context with a certificate chain (leaf first) and its private
    /// key, both PEM, selecting the first of `alpn` the client offers.
    public static func server(certificateChainPEM: String, privateKeyPEM: String, alpn: [String]) throws(TLSError)
        -> TLSContext
    {
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw TLSError(.configuration, TLSError.openSSLReason())
        }
        let tls = TLSContext(context: context, alpn: alpn, isServer: true)
        guard pg_shim_ssl_ctx_set_min_tls12(context) == 1 else {
            throw TLSError(.configuration, TLSError.openSSLReason())
        }
        try tls.useCertificateChain(certificateChainPEM)
        try tls.usePrivateKey(privateKeyPEM)
        if !alpn.isEmpty {
            SSL_CTX_set_alpn_select_cb(context, selectALPN, Unmanaged.passUnretained(tls).toOpaque())
        }
        return tls
    }

    private func useCertificateChain(_ pem: String) throws(TLSError) {
        let bio = memoryBIO(pem)
        defer { BIO_free(bio) }
        guard let leaf = PEM_read_bio_X509(bio, nil, nil, nil) else {
            throw TLSError(.configuration, "bad certificate PEM: \(TLSError.openSSLReason())")
        }
        defer { X509_free(leaf) }
        guard SSL_CTX_use_certificate(context, leaf) == 1 else {
            throw TLSError(.configuration, TLSError.openSSLReason())
        }
        while let intermediate = PEM_read_bio_X509(bio, nil, nil, nil) {
            // add0: the context takes ownership on success.
            if SSL_CTX_ctrl(context, SSL_CTRL_EXTRA_CHAIN_CERT, 0, UnsafeMutableRawPointer(intermediate)) != 1 {
                X509_free(intermediate)
                throw TLSError(.configuration, TLSError.openSSLReason())
            }
        }
        ERR_clear_error()  // the loop ends on a "no start line" error
    }

    private func usePrivateKey(_ pem: String) throws(TLSError) {
        let bio = memoryBIO(pem)
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else {
            throw TLSError(.configuration, "bad private key PEM: \(TLSError.openSSLReason())")
        }
        defer { EVP_PKEY_free(key) }
        guard SSL_CTX_use_PrivateKey(context, key) == 1, SSL_CTX_check_private_key(context) == 1 else {
            throw TLSError(.configuration, "private key does not match the certificate: \(TLSError.openSSLReason())")
        }
    }

    private func memoryBIO(_ text: String) -> OpaquePointer {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { BIO_new_mem_buf_copy($0) }
    }
}

/// BIO_new_mem_buf does not copy; this keeps a private copy alive with the BIO.
private func BIO_new_mem_buf_copy(_ bytes: UnsafeRawBufferPointer) -> OpaquePointer {
    let bio = BIO_new(BIO_s_mem())!
    _ = BIO_write(bio, bytes.baseAddress, Int32(bytes.count))
    return bio
}

/// Server-side ALPN: the first protocol of ours that the client offers, else no ALPN.
private let selectALPN:
    @convention(c) (
        OpaquePointer?, UnsafeMutablePointer<UnsafePointer<UInt8>?>?, UnsafeMutablePointer<UInt8>?,
        UnsafePointer<UInt8>?, UInt32, UnsafeMutableRawPointer?
    ) -> Int32 = { _, out, outLength, offered, offeredLength, cls in
        guard let out, let outLength, let offered, let cls else { return SSL_TLSEXT_ERR_NOACK }
        let tls = Unmanaged<TLSContext>.fromOpaque(cls).takeUnretainedValue()
        return tls.alpnWire.withUnsafeBufferPointer { ours -> Int32 in
            var selected: UnsafeMutablePointer<UInt8>?
            var selectedLength: UInt8 = 0
            let status = SSL_select_next_proto(
                &selected, &selectedLength, ours.baseAddress, UInt32(ours.count), offered, offeredLength)
            guard status == OPENSSL_NPN_NEGOTIATED, let selected else { return SSL_TLSEXT_ERR_ALERT_FATAL }
            // `selected` points into `ours`, which lives as long as the context.
            out.pointee = UnsafePointer(selected)
            outLength.pointee = selectedLength
            return SSL_TLSEXT_ERR_OK
        }
    }
