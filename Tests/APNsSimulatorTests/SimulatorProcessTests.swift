import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator

/// The built `apns-simulator` executable, driven as scripts drive it, and
/// checked with an independent HTTP/2 client (curl on libnghttp2 + OpenSSL).
@Suite(.serialized) struct SimulatorProcessTests {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// A started process and what its ready line said.
    struct Started {
        let process: SpawnedProcess
        let listenPort: Int
        let controlPort: Int
        let caFile: String
        let directory: URL
    }

    func start() async throws -> Started {
        let binary = TestEnvironment.repositoryRoot.appendingPathComponent(".build/debug/apns-simulator")
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw Failure(description: "\(binary.path) is missing: run swift build --build-tests first")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "apns-sim-proc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let config: [String: Any] = [
            "teams": [
                Fixtures.teamID: [
                    "keys": [Fixtures.keyID: try Fixtures.key.publicKey.pemRepresentation],
                    "bundleIds": [Fixtures.bundleID],
                ],
                Fixtures.otherTeamID: [
                    // The raw point, base64url, is accepted as well as PEM.
                    "keys": [Fixtures.otherKeyID: Base64URL.encode(Fixtures.otherKey.publicKey.uncompressedPoint)],
                    "bundleIds": [Fixtures.otherBundleID],
                ],
            ],
            "maxConcurrentStreams": 100,
        ]
        let configFile = directory.appendingPathComponent("config.json")
        try JSONSerialization.data(withJSONObject: config).write(to: configFile)
        let process = try SpawnedProcess(
            binary.path,
            [
                "--config", configFile.path, "--listen", "127.0.0.1:0", "--control", "127.0.0.1:0", "--ca-out",
                directory.appendingPathComponent("ca.pem").path,
            ], standardOutput: .pipe)
        let line = await process.firstOutput()
        guard let ready = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String],
            let listen = ready["listen"].flatMap(ListenAddress.init),
            let control = ready["control"].flatMap(ListenAddress.init),
            let caFile = ready["caFile"]
        else {
            process.kill()
            throw Failure(description: "no ready line, got \(line.debugDescription)")
        }
        return Started(
            process: process, listenPort: listen.port, controlPort: control.port, caFile: caFile, directory: directory)
    }

    /// Runs curl; returns its exit status and standard output.
    func curl(_ arguments: [String]) async throws -> (Int32, String) {
        let result = try await ChildProcess.run("/usr/bin/curl", arguments)
        return (result.status, result.standardOutput)
    }

    func push(_ started: Started, topic: String = Fixtures.bundleID, extra: [String] = []) async throws -> (
        Int32, String
    ) {
        try await curl(
            [
                "-sS", "--http2", "--cacert", started.caFile, "-w", "\n%{http_code} %{http_version}",
                "-H", "authorization: bearer \(Fixtures.defaultToken)", "-H", "apns-topic: \(topic)",
                "-H", "apns-push-type: alert", "--data-binary", String(decoding: Fixtures.payload, as: UTF8.self),
            ]
                + extra + ["https://localhost:\(started.listenPort)/3/device/\(Fixtures.deviceToken)"])
    }

    @Test func helpPrintsTheUsageAndExitsZero() async throws {
        let result = try await BuiltExecutable.run("apns-simulator", ["--help"], environment: [:])
        #expect(result.status == 0)
        #expect(result.standardOutput.hasPrefix("usage: apns-simulator --config"))
    }

    @Test func theBinaryPrintsItsReadyLineAnswersCurlOverHTTP2IgnoresSIGHUPAndExitsCleanlyOnSIGTERM() async throws {
        let started = try await start()
        defer { try? FileManager.default.removeItem(at: started.directory) }

        let (status, output) = try await push(started)
        #expect(status == 0)
        #expect(output == "\n200 2")

        let (_, rejected) = try await push(started, topic: Fixtures.otherBundleID)
        #expect(rejected == "{\"reason\":\"TopicDisallowed\"}\n400 2")

        // The other team's key came from a raw point: its token works for its bundle id.
        let otherToken = Fixtures.token(
            keyID: Fixtures.otherKeyID, teamID: Fixtures.otherTeamID, key: Fixtures.otherKey)
        let (_, other) = try await curl(
            [
                "-sS", "--http2", "--cacert", started.caFile, "-w", "\n%{http_code}", "-H",
                "authorization: bearer \(otherToken)",
                "-H", "apns-topic: \(Fixtures.otherBundleID)", "--data-binary", #"{"aps":{}}"#,
                "https://127.0.0.1:\(started.listenPort)/3/device/\(Fixtures.deviceToken)",
            ])
        #expect(other == "\n200")

        // Without h2 in ALPN there is no connection at all, as with Apple.
        let (http1Status, _) = try await curl(
            ["-sS", "--http1.1", "--cacert", started.caFile, "https://localhost:\(started.listenPort)/3/device/00"])
        #expect(http1Status != 0)

        let stats = try await RawHTTPClient(port: started.controlPort).request("GET", "/stats")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
        #expect(json["accepted"] as? Int == 2)
        #expect(json["rejected"] as? [String: Int] == ["TopicDisallowed": 1])

        // SIGHUP (a closed terminal) is ignored, not the end of the process.
        started.process.signal(SIGHUP)
        try await Task.sleep(for: .milliseconds(200))
        #expect(started.process.isRunning)
        #expect(try await RawHTTPClient(port: started.controlPort).request("GET", "/stats").status == 200)

        let begin = ContinuousClock.now
        started.process.signal(SIGTERM)
        #expect(await started.process.waitForExit() == .init(exited: true, status: 0))
        #expect(ContinuousClock.now - begin < .seconds(5))
    }
}
