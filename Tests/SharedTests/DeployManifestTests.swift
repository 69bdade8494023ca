import Foundation
import TestSupport
import Testing

/// deploy/ cannot run here (no container engine, no cluster), so it is validated:
/// manifests parse, and the environment they set matches what the code reads and requires.
@Suite struct DeployManifestTests {
    static func validate(_ root: URL) async throws -> ChildProcess.Completion {
        try await ChildProcess.run(TestEnvironment.python, [root.appendingPathComponent("deploy/validate.py").path])
    }

    @Test func manifestsParseAndSetExactlyWhatTheCodeReadsAndRequires() async throws {
        let result = try await Self.validate(TestEnvironment.repositoryRoot)
        #expect(result.status == 0, "\(result.standardOutput)\(result.standardError)")
        #expect(result.standardOutput.hasSuffix("variables the code reads, 0 problems\n"))
    }

    /// The validator itself can fail: a copy of deploy/ with an unknown variable and
    /// a worker that lost its Redis URL is refused, naming both.
    @Test func validatorRefusesUnknownAndMissingVariables() async throws {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-deploy-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: copy) }
        let root = TestEnvironment.repositoryRoot
        try FileManager.default.createDirectory(
            at: copy.appendingPathComponent("Sources/Shared"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: root.appendingPathComponent("Sources/Shared/Configuration"),
            to: copy.appendingPathComponent("Sources/Shared/Configuration"))
        try FileManager.default.copyItem(
            at: root.appendingPathComponent("deploy"), to: copy.appendingPathComponent("deploy"))
        let configMap = copy.appendingPathComponent("deploy/kubernetes/configmap.yaml")
        try (String(contentsOf: configMap, encoding: .utf8) + "  INGRESS_COLOUR: \"blue\"\n")
            .write(to: configMap, atomically: true, encoding: .utf8)
        let secret = copy.appendingPathComponent("deploy/kubernetes/secret.yaml.example")
        try String(contentsOf: secret, encoding: .utf8).replacingOccurrences(of: "  REDIS_URL:", with: "  # REDIS_URL:")
            .write(to: secret, atomically: true, encoding: .utf8)

        let result = try await Self.validate(copy)
        #expect(result.status == 1)
        #expect(result.standardOutput.contains("configmap.yaml: sets INGRESS_COLOUR, which the code does not read"))
        #expect(result.standardOutput.contains("worker.yaml: worker lacks REDIS_URL, which the worker requires"))
        // Kubernetes would not even start the worker: its reference names a key the Secret lacks.
        #expect(
            result.standardOutput.contains(
                "worker: REDIS_URL refers to Secret pushgate-secrets key REDIS_URL, which is not there"))
    }
}
