import Foundation

/// A throw-away `redis-server` of one test (no persistence) on a port of its own,
/// under a temporary folder, so stopping it or making it a replica disturbs neither
/// the shared test Redis nor other suites. `arguments` are added to its command line.
package struct PrivateRedis: Sendable {
    package struct StartFailure: Error, CustomStringConvertible {
        package let description: String
        /// Another socket took the port between its choice and the server's bind
        /// (an outgoing connection's local port, say): another port will do.
        var portTaken = false
    }

    package let port: Int
    let arguments: [String]
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
        "pushgate-redis-\(UInt32.random(in: 0...UInt32.max))")
    package var url: String { "redis://127.0.0.1:\(port)/0" }

    package init(arguments: [String] = []) throws {
        port = try UnusedPort.loopback()
        self.arguments = arguments
    }

    /// Runs `body` with a started server (`arguments` added to its command line), and
    /// stops it afterwards, also when `body` throws.
    package static func with(arguments: [String] = [], _ body: (PrivateRedis) async throws -> Void) async throws {
        var server = try PrivateRedis(arguments: arguments)
        for attempt in 1...3 {
            do {
                try await server.start()
                break
            } catch let failure as StartFailure where failure.portTaken && attempt < 3 {
                server = try PrivateRedis(arguments: arguments)
            }
        }
        do {
            try await body(server)
        } catch {
            try? await server.stop()
            throw error
        }
        try await server.stop()
    }

    /// Starts it and waits until it answers.
    package func start() async throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let status = try await SpawnedProcess.run(
            "/usr/bin/redis-server",
            [
                "--bind", "127.0.0.1", "--port", "\(port)", "--save", "", "--appendonly", "no", "--daemonize", "yes",
                "--dir", folder.path, "--pidfile", folder.appendingPathComponent("redis.pid").path,
                "--logfile", folder.appendingPathComponent("redis.log").path,
            ] + arguments)
        guard status == 0 else { throw StartFailure(description: "redis-server exited with \(status)") }
        for _ in 0..<50 {
            if try await cli(["ping"]) == 0 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        let log = (try? String(contentsOf: folder.appendingPathComponent("redis.log"), encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(at: folder)
        throw StartFailure(
            description: "the private redis-server does not answer on port \(port)",
            portTaken: log.contains("Address already in use"))
    }

    /// Runs `redis-cli` against it; its exit status.
    @discardableResult
    package func cli(_ arguments: [String]) async throws -> Int32 {
        try await SpawnedProcess.run("/usr/bin/redis-cli", ["-p", "\(port)"] + arguments)
    }

    /// Shuts it down and waits until it no longer answers.
    package func stop() async throws {
        try await cli(["shutdown", "nosave"])
        for _ in 0..<50 {
            if try await cli(["ping"]) != 0 { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        try? FileManager.default.removeItem(at: folder)
    }
}
