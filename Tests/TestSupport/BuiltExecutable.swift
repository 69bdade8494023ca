import Foundation

/// The project's own executables, as built for the tests (`ingress-service`,
/// `dispatch-worker`, `apns-simulator`, …), and a way to run one to completion.
package enum BuiltExecutable {
    package struct Result: Sendable {
        package let status: Int32
        package let standardOutput: String
        package let standardError: String
    }

    /// The built executable next to the test bundle, or under `.build/debug`.
    package static func url(_ name: String) -> URL {
        let sibling = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: sibling.path) { return sibling }
        return TestEnvironment.repositoryRoot.appendingPathComponent(".build/debug/\(name)")
    }

    /// Runs `name` with exactly `environment` and waits for it to exit.
    package static func run(_ name: String, _ arguments: [String], environment: [String: String]) async throws -> Result
    {
        try await runProgram(url(name), arguments, environment: environment)
    }

    /// Runs any program (an interpreter, a tool) the same way.
    package static func runProgram(_ program: URL, _ arguments: [String], environment: [String: String]) async throws
        -> Result
    {
        let (outputFile, errorFile) = (ChildProcess.temporaryFile("out"), ChildProcess.temporaryFile("err"))
        defer { for file in [outputFile, errorFile] { try? FileManager.default.removeItem(atPath: file) } }
        let status = try await SpawnedProcess.run(
            program.path, arguments, environment: environment, standardOutput: .file(outputFile),
            standardError: .file(errorFile))
        return Result(
            status: status, standardOutput: try String(contentsOfFile: outputFile, encoding: .utf8),
            standardError: try String(contentsOfFile: errorFile, encoding: .utf8))
    }
}
