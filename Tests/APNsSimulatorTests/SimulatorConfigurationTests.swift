import Foundation
import Shared
import Testing

@testable import APNsSimulator

@Suite struct SimulatorConfigurationTests {
    @Test func theExampleFileLoadsWithItsValues() throws {
        let path = TestEnvironmentPath.exampleConfig
        let configuration = try SimulatorConfiguration(contentsOfFile: path)
        #expect(configuration.maxConcurrentStreams == 500)
        #expect(configuration.tokenUpdatePeriodSeconds == 1200)
        #expect(configuration.tokenLifetimeSeconds == 3600)
        let team = try #require(configuration.teams["ABCDE12345"])
        #expect(team.bundleIDs == ["com.example.app", "com.example.app.widget"])
        #expect(team.keys.count == 2)
    }

    @Test func defaultsApplyWhenOnlyTeamsAreGiven() throws {
        let configuration = try SimulatorConfiguration(json: Data(#"{"teams":{}}"#.utf8))
        #expect(configuration.maxConcurrentStreams == 500)
        #expect(configuration.tokenUpdatePeriodSeconds == 1200)
        #expect(configuration.maxRecordedNotifications == 10_000)
    }

    @Test func keysMayBePEMPointOrP8() throws {
        let key = try P256PrivateKey.generate()
        let forms = [
            try key.publicKey.pemRepresentation, Base64URL.encode(key.publicKey.uncompressedPoint),
            Data(key.publicKey.uncompressedPoint).base64EncodedString(), try key.pemRepresentation,
        ]
        for form in forms { #expect(try SimulatorConfiguration.publicKey(form) == key.publicKey) }
        #expect(throws: (any Error).self) { try SimulatorConfiguration.publicKey("nonsense!") }
    }

    @Test func aBundleIDUnderTwoTeamsIsRefused() throws {
        let json = #"{"teams":{"A":{"bundleIds":["com.x"]},"B":{"bundleIds":["com.x"]}}}"#
        #expect(throws: SimulatorConfiguration.Failure.self) { try SimulatorConfiguration(json: Data(json.utf8)) }
    }

    @Test func badValuesAreRefused() throws {
        for json in [#"{}"#, #"{"teams":{},"maxConcurrentStreams":0}"#, #"{"teams":{"A":{"keys":{"K":"x"}}}}"#] {
            #expect(throws: SimulatorConfiguration.Failure.self) { try SimulatorConfiguration(json: Data(json.utf8)) }
        }
    }

    @Test func theCommandLineIsParsed() throws {
        let arguments = try SimulatorArguments([
            "--config", "c.json", "--listen", "127.0.0.1:0", "--control", "127.0.0.1:9", "--ca-out", "/tmp/ca.pem",
        ])
        #expect(arguments.configPath == "c.json")
        #expect(arguments.listen == ListenAddress(host: "127.0.0.1", port: 0))
        #expect(arguments.control == ListenAddress(host: "127.0.0.1", port: 9))
        #expect(arguments.caFile == "/tmp/ca.pem")
        #expect(throws: SimulatorArguments.Failure.self) { try SimulatorArguments(["--listen", "x"]) }
        #expect(throws: SimulatorArguments.Failure.self) { try SimulatorArguments(["--config"]) }
    }
}

enum TestEnvironmentPath {
    static var exampleConfig: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
            .appendingPathComponent("Sources/APNsSimulator/example-config.json").path
    }
}
