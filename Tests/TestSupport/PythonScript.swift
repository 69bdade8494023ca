import Foundation

/// Runs a Python snippet with the test tools (`TestEnvironment.python`).
package enum PythonScript {
    /// What the script printed, trimmed; a non-zero exit status throws with its errors.
    package static func run(_ script: String, _ arguments: [String]) async throws -> String {
        let result = try await runCollecting(script, arguments)
        guard result.status == 0 else {
            throw RawHTTPClient.Failure(description: "python \(arguments.first ?? "") failed: \(result.standardError)")
        }
        return result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The script's exit status and both outputs, as they are.
    package static func runCollecting(_ script: String, _ arguments: [String]) async throws -> ChildProcess.Completion {
        try await ChildProcess.run(TestEnvironment.python, ["-c", script] + arguments)
    }
}
