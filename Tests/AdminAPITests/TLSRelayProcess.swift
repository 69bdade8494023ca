import Foundation
import TestSupport

/// TLS in front of a plain-HTTP port, as an operator's terminating proxy puts it in
/// front of the admin API: Python's `ssl` module (an implementation independent of
/// ours) with a certificate from `TestCertificates`, relaying each connection's bytes
/// both ways and closing without close_notify, as many proxies do.
final class TLSRelayProcess: Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private let process: SpawnedProcess
    let port: Int

    private init(process: SpawnedProcess, port: Int) {
        self.process = process
        self.port = port
    }

    private static let script = """
        import socket, ssl, sys, threading
        certificate, key, upstream = sys.argv[1], sys.argv[2], int(sys.argv[3])
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate, key)
        server = socket.create_server(("127.0.0.1", 0))
        print(server.getsockname()[1], flush=True)

        def relay(source, target):
            try:
                while data := source.recv(65536):
                    target.sendall(data)
            except OSError:
                pass
            finally:
                source.close()
                target.close()

        while True:
            client, _ = server.accept()
            try:
                secure = context.wrap_socket(client, server_side=True)
            except (ssl.SSLError, OSError):
                client.close()
                continue
            backend = socket.create_connection(("127.0.0.1", upstream))
            threading.Thread(target=relay, args=(secure, backend), daemon=True).start()
            threading.Thread(target=relay, args=(backend, secure), daemon=True).start()
        """

    static func start(certificates: TestCertificates, upstreamPort: Int) async throws -> TLSRelayProcess {
        let directory = certificates.directory
        let process = try SpawnedProcess(
            TestEnvironment.python.path,
            [
                "-c", script, directory.appendingPathComponent("server.pem").path,
                directory.appendingPathComponent("server.key").path, String(upstreamPort),
            ], standardOutput: .pipe)
        let line = await process.firstOutput()
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.kill()
            throw Failure(description: "the TLS relay printed no port, got \(line.debugDescription)")
        }
        return TLSRelayProcess(process: process, port: port)
    }

    func stop() { process.kill() }
}
