import Foundation
import Shared

/// The whole simulator assembled: certificate authority, APNs listener and
/// control API. `main` runs it; tests start the same thing in-process on port 0.
final class SimulatorApplication: Sendable {
    let server: SimulatorServer
    let control: HTTPServer
    let authority: CertificateAuthority
    let caFile: String
    let listenAddress: ListenAddress
    let controlAddress: ListenAddress

    var state: SimulatorState { server.state }

    /// The line printed on stdout when ready: `{"listen":"…","control":"…","caFile":"…"}`.
    var readyLine: String {
        "{\"listen\":\(JSONString.quote(listenAddress.description)),"
            + "\"control\":\(JSONString.quote(controlAddress.description)),\"caFile\":\(JSONString.quote(caFile))}"
    }

    private init(
        server: SimulatorServer, control: HTTPServer, authority: CertificateAuthority, caFile: String,
        listen: ListenAddress, controlAddress: ListenAddress
    ) {
        self.server = server
        self.control = control
        self.authority = authority
        self.caFile = caFile
        self.listenAddress = listen
        self.controlAddress = controlAddress
    }

    /// Makes a CA, writes its certificate to `caFile`, and starts both listeners.
    static func start(
        configuration: SimulatorConfiguration, listen: ListenAddress, control: ListenAddress, caFile: String,
        logger: Logger
    ) async throws -> SimulatorApplication {
        let authority = try CertificateAuthority.make()
        try authority.write(caFileTo: caFile)
        let state = SimulatorState(configuration: configuration)
        let server = try await SimulatorServer.start(
            address: listen, tls: try authority.serverContext(), state: state, logger: logger)
        let controlServer = HTTPServer(
            configuration: HTTPServer.Configuration(address: control, threads: 2, connectionLimit: 256),
            handler: ControlAPI(server: server), logger: logger.child("control"))
        do {
            try controlServer.start()
        } catch {
            await server.shutdown(deadline: .zero)
            throw error
        }
        return SimulatorApplication(
            server: server, control: controlServer, authority: authority, caFile: caFile,
            listen: ListenAddress(host: listen.host, port: server.port),
            controlAddress: ListenAddress(host: control.host, port: controlServer.port))
    }

    /// GOAWAY to every connection, a short drain, then both listeners closed.
    func shutdown() async {
        await server.shutdown()
        await control.shutdown(deadline: .seconds(1))
    }
}
