import Foundation
import TestSupport

/// The built `dispatch-worker` executable, run as a process (for `kill -9` and
/// SIGTERM); killed when it goes away still running.
final class WorkerProcess: Sendable {
    private let process: SpawnedProcess

    init(environment: [String: String]) throws {
        process = try SpawnedProcess(
            BuiltExecutable.url("dispatch-worker").path, [],
            environment: environment.merging(["LOG_LEVEL": "warning"]) { old, _ in old })
    }

    var pid: Int32 { process.pid }

    func signal(_ number: Int32) { process.signal(number) }

    /// Waits for the exit; returns (exited normally, status).
    func waitForExit() async -> (exited: Bool, status: Int32) {
        let ended = await process.waitForExit()
        return (ended.exited, ended.status)
    }
}
