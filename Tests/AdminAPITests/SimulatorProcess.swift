import Foundation
import Shared
import TestSupport

/// The built `apns-simulator`, started on port 0 with two teams, as tests of the
/// admin API's APNs probes need it (Apple's answers, never a fake).
final class SimulatorProcess: Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A team the simulator knows: its key (the `.p8`), key id and bundle ids.
    struct Team: Sendable {
        let teamID: String
        let keyID: String
        let key: P256PrivateKey
        let bundleIDs: [String]
    }

    private let process: SpawnedProcess
    let listenPort: Int
    /// The control API's port (`/stats`, …).
    let controlPort: Int
    let caFile: String
    let directory: URL

    private init(process: SpawnedProcess, listenPort: Int, controlPort: Int, caFile: String, directory: URL) {
        self.process = process
        self.listenPort = listenPort
        self.controlPort = controlPort
        self.caFile = caFile
        self.directory = directory
    }

    /// APNs production as the admin API should see it.
    var environment: APNsEnvironment { APNsEnvironment(name: "production", host: "localhost", port: listenPort) }

    static func start(teams: [Team]) async throws -> SimulatorProcess {
        let binary = BuiltExecutable.url("apns-simulator")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("admin-sim-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuredTeams: [String: Any] = [:]
        for team in teams {
            configuredTeams[team.teamID] = [
                "keys": [team.keyID: try team.key.publicKey.pemRepresentation], "bundleIds": team.bundleIDs,
            ]
        }
        let configFile = directory.appendingPathComponent("config.json")
        try JSONSerialization.data(withJSONObject: ["teams": configuredTeams, "eventLoops": 1]).write(to: configFile)
        let process = try SpawnedProcess(
            binary.path,
            [
                "--config", configFile.path, "--listen", "127.0.0.1:0", "--control", "127.0.0.1:0", "--ca-out",
                directory.appendingPathComponent("ca.pem").path, "--log-level", "warning",
            ], standardOutput: .pipe)
        let line = await process.firstOutput()
        guard let ready = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String],
            let listen = ready["listen"].flatMap(ListenAddress.init),
            let control = ready["control"].flatMap(ListenAddress.init), let caFile = ready["caFile"]
        else {
            process.kill()
            throw Failure(description: "apns-simulator gave no ready line, got \(line.debugDescription)")
        }
        return SimulatorProcess(
            process: process, listenPort: listen.port, controlPort: control.port, caFile: caFile,
            directory: directory)
    }

    func stop() {
        process.kill()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Starts a simulator, runs `body`, stops it.
    static func with(teams: [Team], _ body: (SimulatorProcess) async throws -> Void) async throws {
        let simulator = try await start(teams: teams)
        do {
            try await body(simulator)
        } catch {
            simulator.stop()
            throw error
        }
        simulator.stop()
    }
}
