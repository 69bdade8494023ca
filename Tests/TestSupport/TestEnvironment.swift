import Foundation
import Shared

/// Where the real Postgres and Redis of the tests are. `scripts/test` exports
/// `DATABASE_URL` and `REDIS_URL` (from `scripts/services`); the defaults are the
/// same values, so `swift test` works after `scripts/services start` too. A test
/// whose server is not running fails: it is never skipped.
package enum TestEnvironment {
    package static var databaseURL: String {
        ProcessInfo.processInfo.environment["DATABASE_URL"] ?? "postgresql://pushgate@127.0.0.1:55432/pushgate"
    }

    package static var redisURL: String {
        ProcessInfo.processInfo.environment["REDIS_URL"] ?? "redis://127.0.0.1:56379/0"
    }

    /// The repository's root folder, for `scripts/…` and built executables.
    package static var repositoryRoot: URL {
        // Tests/TestSupport/TestEnvironment.swift → the repository.
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
    }

    /// A logger whose lines the test can inspect.
    package static func capturingLogger(_ component: String = "test") -> (Logger, CapturedLogLines) {
        let lines = CapturedLogLines()
        return (Logger(component: component, minimumLevel: .debug, sink: .capturing(into: lines)), lines)
    }

    /// The Python with the test tools (`cryptography`, `http_ece`, `pywebpush`,
    /// `yaml`): `PUSHGATE_PYTHON`, else the repository's `.venv` made by `scripts/setup`.
    package static var python: URL {
        if let configured = ProcessInfo.processInfo.environment["PUSHGATE_PYTHON"], !configured.isEmpty {
            return URL(fileURLWithPath: configured)
        }
        return repositoryRoot.appendingPathComponent(".venv/bin/python3")
    }
}
