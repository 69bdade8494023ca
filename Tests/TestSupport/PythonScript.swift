import Synchronization
import Foundation

/// Runs a Python snippet with the test tools (`TestEnvironment.python`) and returns
/// what it printed, trimmed.
package enum PythonScript {
    /// The script runs on a thread of its own: a test blocking one of the few
    /// cooperative threads could starve the in-process servers it talks to.
    package static func run(_ script: String, _ arguments: [String]) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread { continuation.resume(with: Result { try runBlocking(script, arguments) }) }
            thread.start()
        }
    }

    private static func runBlocking(_ script: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = TestEnvironment.python
        process.arguments = ["-c", script] + arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Read both pipes to the end before waiting: a full pipe would block the child.
        let errorData = Mutex<Data>(Data())
        let errorsRead = DispatchSemaphore(value: 0)
        Thread {
            let data = errors.fileHandleForReading.readDataToEndOfFile()
            errorData.withLock { $0 = data }
            errorsRead.signal()
        }.start()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        errorsRead.wait()
        guard process.terminationStatus == 0 else {
            let message = String(decoding: errorData.withLock { $0 }, as: UTF8.self)
            throw RawHTTPClient.Failure(description: "python \(arguments.first ?? "") failed: \(message)")
        }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
