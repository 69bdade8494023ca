import Foundation

/// A throw-away CA and a server certificate signed by it, made with the
/// `openssl` command-line tool (an implementation independent of our code).
package struct TestCertificates {
    package let directory: URL
    package var caFile: String { directory.appendingPathComponent("ca.pem").path }
    package var serverCertificatePEM: String { read("server.pem") }
    package var serverKeyPEM: String { read("server.key") }

    /// `names` become the server certificate's DNS subject alternative names.
    package static func make(serverNames: [String] = ["localhost"]) async throws -> TestCertificates {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushgate-certs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let san = serverNames.map { "DNS:\($0)" }.joined(separator: ",")
        let script = """
            set -e
            openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
              -subj '/CN=Pushgate Test CA' -keyout ca.key -out ca.pem 2>/dev/null
            openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj '/CN=\(serverNames[0])' \
              -keyout server.key -out server.csr 2>/dev/null
            printf 'subjectAltName=\(san)\\nextendedKeyUsage=serverAuth\\n' > ext.cnf
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
              -extfile ext.cnf -out server.pem 2>/dev/null
            """
        let result = try await ChildProcess.run("/bin/sh", ["-c", script], in: directory)
        guard result.status == 0 else {
            throw RawHTTPClient.Failure(description: "openssl failed with status \(result.status)")
        }
        return TestCertificates(directory: directory)
    }

    private func read(_ name: String) -> String {
        (try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)) ?? ""
    }
}
