import Foundation

/// The project's own executables, as built for the tests (`ingress-service`,
/// `dispatch-worker`, `apns-simulator`, …), and a way to run one to completion
/// (`ChildProcess`).
package enum BuiltExecutable {
    /// The built executable next to the test bundle, or under `.build/debug`.
    package static func url(_ name: String) -> URL {
        let sibling = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: sibling.path) { return sibling }
        return TestEnvironment.repositoryRoot.appendingPathComponent(".build/debug/\(name)")
    }

    /// Runs `name` with exactly `environment` and waits for it to exit.
    package static func run(_ name: String, _ arguments: [String], environment: [String: String]) async throws
        -> ChildProcess.Completion
    {
        try await ChildProcess.run(url(name), arguments, environment: environment)
    }
}
