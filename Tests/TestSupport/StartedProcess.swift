import Foundation

/// Starts long-running helper programs (the simulator, a TLS relay) that announce
/// themselves on their standard output once ready.
package enum StartedProcess {
    /// Runs `process` with its standard output on a pipe and returns the first text
    /// it writes there (its ready line), waited for on a thread of its own.
    package static func runReadingFirstOutput(_ process: Process) async throws -> String {
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    returning: String(decoding: output.fileHandleForReading.availableData, as: UTF8.self))
            }
        }
    }
}
