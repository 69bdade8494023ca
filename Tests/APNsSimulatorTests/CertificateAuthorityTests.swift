import Foundation
import TestSupport
import Testing

@testable import APNsSimulator

/// The in-process CA, checked with the openssl command-line tool.
@Suite struct CertificateAuthorityTests {
    func openssl(_ arguments: [String], in directory: URL) async throws -> (Int32, String) {
        let result = try await ChildProcess.run("/usr/bin/openssl", arguments, in: directory)
        return (result.status, result.standardOutput + result.standardError)
    }

    @Test func theServerCertificateVerifiesForLocalhostAnd127001AsAServer() async throws {
        let authority = try CertificateAuthority.make()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try authority.write(caFileTo: directory.appendingPathComponent("ca.pem").path)
        try Data(authority.serverCertificatePEM.utf8).write(to: directory.appendingPathComponent("server.pem"))

        let verify = ["verify", "-x509_strict", "-CAfile", "ca.pem", "-purpose", "sslserver"]
        #expect(
            try await openssl(verify + ["-verify_hostname", "localhost", "server.pem"], in: directory) == (
                0, "server.pem: OK\n"
            ))
        #expect(try await openssl(verify + ["-verify_ip", "127.0.0.1", "server.pem"], in: directory).0 == 0)
        #expect(try await openssl(verify + ["-verify_hostname", "example.com", "server.pem"], in: directory).0 != 0)

        let (_, text) = try await openssl(["x509", "-in", "server.pem", "-noout", "-text"], in: directory)
        #expect(text.contains("DNS:localhost, IP Address:127.0.0.1"))
        #expect(text.contains("TLS Web Server Authentication"))
        #expect(text.contains("ASN1 OID: prime256v1"))
        let (_, ca) = try await openssl(["x509", "-in", "ca.pem", "-noout", "-text"], in: directory)
        #expect(ca.contains("CA:TRUE"))
        #expect(ca.contains("ASN1 OID: prime256v1"))
    }

    @Test func eachAuthorityIsNew() throws {
        #expect(try CertificateAuthority.make().caCertificatePEM != CertificateAuthority.make().caCertificatePEM)
    }
}
