import Foundation
import TestSupport

/// The built `dispatch-worker` executable, run as a process (for `kill -9` and SIGTERM).
final class WorkerProcess: @unchecked Sendable {
    let process = Process()

    init(environment: [String: String]) throws {
        process.executableURL = BuiltExecutable.url("dispatch-worker")
        process.environment = environment.merging(["LOG_LEVEL": "warning"]) { old, _ in old }
        process.standardOutput = FileHandle.nullDevice
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the exit; returns (exited normally, status).
    func waitForExit() async -> (exited: Bool, status: Int32) {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                self.process.waitUntilExit()
                continuation.resume(
                    returning: (self.process.terminationReason == .exit, self.process.terminationStatus))
            }
        }
    }

    deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
}
