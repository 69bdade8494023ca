import Foundation

/// Runs a program to completion and collects what it wrote (through `SpawnedProcess`).
package enum ChildProcess {
    package struct Completion: Sendable {
        package var status: Int32
        package var output: [UInt8]
        package var errors: [UInt8]

        package var standardOutput: String { String(decoding: output, as: UTF8.self) }
        package var standardError: String { String(decoding: errors, as: UTF8.self) }
    }

    /// `directory` is the working directory (the test's own when nil); `environment`
    /// the child's whole environment (this process's when nil); standard input is empty.
    package static func run(
        _ executable: URL, _ arguments: [String], in directory: URL? = nil, environment: [String: String]? = nil
    ) async throws -> Completion {
        let (outputFile, errorFile) = (temporaryFile("out"), temporaryFile("err"))
        defer { for file in [outputFile, errorFile] { try? FileManager.default.removeItem(atPath: file) } }
        // posix_spawn has no working directory of its own here: env(1) changes to it.
        let (program, programArguments) =
            directory.map { ("/usr/bin/env", ["-C", $0.path, executable.path] + arguments) }
            ?? (executable.path, arguments)
        let status = try await SpawnedProcess.run(
            program, programArguments, environment: environment, standardOutput: .file(outputFile),
            standardError: .file(errorFile))
        return Completion(
            status: status, output: Array(FileManager.default.contents(atPath: outputFile) ?? Data()),
            errors: Array(FileManager.default.contents(atPath: errorFile) ?? Data()))
    }

    package static func run(_ executable: String, _ arguments: [String], in directory: URL? = nil) async throws
        -> Completion
    {
        try await run(URL(fileURLWithPath: executable), arguments, in: directory)
    }

    /// A path for a child's output, unique to this run.
    private static func temporaryFile(_ kind: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-child-\(UUID().uuidString).\(kind)")
            .path
    }
}
