import Foundation
import Synchronization

/// Runs a program to completion and collects what it wrote.
///
/// The program is waited for on a thread of its own: a test blocking one of the
/// few cooperative threads could starve the in-process servers it talks to.
package enum ChildProcess {
    package struct Completion: Sendable {
        package var status: Int32
        package var output: [UInt8]
        package var errors: [UInt8]

        package var standardOutput: String { String(decoding: output, as: UTF8.self) }
        package var standardError: String { String(decoding: errors, as: UTF8.self) }
    }

    /// `directory` is the working directory (the test's own when nil); standard
    /// input is empty.
    package static func run(_ executable: URL, _ arguments: [String], in directory: URL? = nil) async throws
        -> Completion
    {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Swift.Result { try runBlocking(executable, arguments, directory) })
            }.start()
        }
    }

    package static func run(_ executable: String, _ arguments: [String], in directory: URL? = nil) async throws
        -> Completion
    {
        try await run(URL(fileURLWithPath: executable), arguments, in: directory)
    }

    private static func runBlocking(_ executable: URL, _ arguments: [String], _ directory: URL?) throws -> Completion {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
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
        return Completion(
            status: process.terminationStatus, output: Array(data), errors: Array(errorData.withLock { $0 }))
    }
}
