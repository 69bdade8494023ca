import Foundation
import Shared
import Testing

/// A database of its own for one test, created with a random name and dropped at the end.
package struct ScratchDatabase {
    package let name: String
    package let url: String

    package static func create(_ purpose: String) async throws -> ScratchDatabase {
        let name = "pushgate_test_\(purpose)_\(UInt32.random(in: 0...UInt32.max))"
        var components = try #require(URLComponents(string: TestEnvironment.databaseURL))
        components.path = "/" + name
        let admin = try await PostgresConnection.connect(url: TestEnvironment.databaseURL)
        defer { admin.close() }
        try await admin.execute("CREATE DATABASE \(identifier: name)")
        return ScratchDatabase(name: name, url: try #require(components.string))
    }

    package func drop() async throws {
        let admin = try await PostgresConnection.connect(url: TestEnvironment.databaseURL)
        defer { admin.close() }
        try await admin.execute("DROP DATABASE IF EXISTS \(identifier: name) WITH (FORCE)")
    }
}
