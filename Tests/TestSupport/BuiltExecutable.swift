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
        let name = program.lastPathComponent
        let directory = FileManager.default.temporaryDirectory
        let outputFile = directory.appendingPathComponent("\(name)-\(UUID().uuidString).out")
        let errorFile = directory.appendingPathComponent("\(name)-\(UUID().uuidString).err")
        for file in [outputFile, errorFile] { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
        defer { for file in [outputFile, errorFile] { try? FileManager.default.removeItem(at: file) } }
        let output = try FileHandle(forWritingTo: outputFile)
        let error = try FileHandle(forWritingTo: errorFile)
        let process = Process()
        process.executableURL = program
        process.arguments = arguments
        process.environment = environment
        process.standardOutput = output
        process.standardError = error
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        try output.close()
        try error.close()
        return Result(
            status: status, standardOutput: try String(contentsOf: outputFile, encoding: .utf8),
            standardError: try String(contentsOf: errorFile, encoding: .utf8))
    }
}
