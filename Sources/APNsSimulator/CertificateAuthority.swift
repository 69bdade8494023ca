import COpenSSL
import CShims
import Foundation
import Shared

/// A throw-away certificate authority made in-process with OpenSSL: a P-256 CA
/// and a P-256 leaf for `localhost` (SAN `DNS:localhost`, `IP:127.0.0.1`,
/// extended key usage serverAuth) that the simulator serves. Clients trust it
/// through `APNS_CA_FILE` (the CA PEM written by `write(caFileTo:)`); nothing is
/// ever added to a system trust store.
struct CertificateAuthority: Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// The CA certificate, PEM.
    let caCertificatePEM: String
    /// The server (leaf) certificate, PEM.
    let serverCertificatePEM: String
    /// The server's private key, PKCS#8 PEM.
    let serverKeyPEM: String

    /// Makes a new CA and a server certificate for `dnsNames` and `ipAddresses`,
    /// valid from an hour ago for `validDays`.
    static func make(
        dnsNames: [String] = ["localhost"], ipAddresses: [String] = ["127.0.0.1"], validDays: Int = 30
    ) throws(Failure) -> CertificateAuthority {
        let caKey = try generateKey()
        defer { EVP_PKEY_free(caKey) }
        let serverKey = try generateKey()
        defer { EVP_PKEY_free(serverKey) }
        let validity = (notBefore: -3600, notAfter: validDays * 86_400)

        // Subject key id before authority key id: a self-signed certificate's
        // AKID is read from its own SKID.
        let ca = try issue(
            subjectKey: caKey, commonName: "Pushgate APNs Simulator CA", issuer: nil, issuerKey: caKey,
            validity: validity,
            extensions: [
                ("basicConstraints", "critical,CA:TRUE,pathlen:0"),
                ("keyUsage", "critical,keyCertSign,cRLSign"),
                ("subjectKeyIdentifier", "hash"),
                ("authorityKeyIdentifier", "keyid:always"),
            ])
        defer { X509_free(ca) }
        let subjectAltNames = (dnsNames.map { "DNS:\($0)" } + ipAddresses.map { "IP:\($0)" }).joined(separator: ",")
        let server = try issue(
            subjectKey: serverKey, commonName: dnsNames.first ?? "localhost", issuer: ca, issuerKey: caKey,
            validity: validity,
            extensions: [
                ("basicConstraints", "critical,CA:FALSE"),
                ("keyUsage", "critical,digitalSignature"),
                ("extendedKeyUsage", "serverAuth"),
                ("subjectAltName", subjectAltNames),
                ("subjectKeyIdentifier", "hash"),
                ("authorityKeyIdentifier", "keyid:always"),
            ])
        defer { X509_free(server) }
        return CertificateAuthority(
            caCertificatePEM: try pem { PEM_write_bio_X509($0, ca) },
            serverCertificatePEM: try pem { PEM_write_bio_X509($0, server) },
            serverKeyPEM: try pem { PEM_write_bio_PrivateKey($0, serverKey, nil, nil, 0, nil, nil) })
    }

    /// Writes the CA certificate to `path` (replacing it), for `APNS_CA_FILE` or `curl --cacert`.
    func write(caFileTo path: String) throws {
        try Data(caCertificatePEM.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    /// A TLS server context with the leaf certificate, offering only `h2` through ALPN.
    func serverContext() throws(TLSError) -> TLSContext {
        try TLSContext.server(certificateChainPEM: serverCertificatePEM, privateKeyPEM: serverKeyPEM, alpn: ["h2"])
    }

    // MARK: OpenSSL

    private static func generateKey() throws(Failure) -> OpaquePointer {
        guard let key = pg_shim_EVP_EC_gen("P-256") else { throw failure("cannot generate a P-256 key") }
        return key
    }

    private static func issue(
        subjectKey: OpaquePointer, commonName: String, issuer: OpaquePointer?, issuerKey: OpaquePointer,
        validity: (notBefore: Int, notAfter: Int), extensions: [(String, String)]
    ) throws(Failure) -> OpaquePointer {
        var serial: UInt64 = 0
        withUnsafeMutableBytes(of: &serial) { _ = RAND_bytes($0.baseAddress!.assumingMemoryBound(to: UInt8.self), 8) }
        serial = (serial >> 1) | 1  // positive and non-zero
        // strdup'd C strings, name then value, freed after the call.
        let texts: [String] = extensions.flatMap { [$0.0, $0.1] }
        let strings: [UnsafeMutablePointer<CChar>?] = texts.map { strdup($0) }
        defer { for string in strings { free(string) } }
        let constants: [UnsafePointer<CChar>?] = strings.map { $0.map { UnsafePointer($0) } }
        let certificate = constants.withUnsafeBufferPointer { pointers in
            pg_shim_x509_issue(
                subjectKey, commonName, issuer, issuerKey, serial, validity.notBefore, validity.notAfter,
                pointers.baseAddress, extensions.count)
        }
        guard let certificate else { throw failure("cannot issue the certificate for \(commonName)") }
        return certificate
    }

    private static func pem(_ write: (OpaquePointer) -> Int32) throws(Failure) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw failure("BIO_new failed") }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else { throw failure("cannot write PEM") }
        var data: UnsafeMutablePointer<CChar>?
        let length = pg_shim_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { throw failure("empty PEM") }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
        }
    }

    private static func failure(_ what: String) -> Failure {
        let code = ERR_get_error()
        ERR_clear_error()
        var buffer = [CChar](repeating: 0, count: 256)
        if code != 0 { ERR_error_string_n(code, &buffer, buffer.count) }
        let reason = code == 0 ? "" : ": " + buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return Failure(description: "certificate authority: \(what)\(reason)")
    }
}
