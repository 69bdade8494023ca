import Foundation
import Testing

@testable import Shared

/// Restarts the test Redis (`scripts/services restart redis`, with this process's
/// environment, so `PUSHGATE_REDIS_PORT` picks the same instance): run on its own
/// with `swift test --filter Disruptive`, never alongside the other suites.
@Suite(.serialized) struct DisruptiveRedisRestartTests {
    @Test func poolWorksAgainAfterRedisRestartsAndInFlightCommandFailsWithConnectionError() async throws {
        let client = try RedisTesting.client(maximumConnections: 2, commandTimeout: .seconds(20))
        defer { client.close() }
        let prefix = RedisTesting.uniquePrefix("restart")
        let script = RedisScript(source: "return redis.call('INCR', KEYS[1])")

        // Two idle connections in the pool, both of which have loaded the script.
        async let first = client.pipeline([.script(script, keys: [prefix + "a"]), RedisCommand("CLIENT", "ID")])
        async let second = client.pipeline([.script(script, keys: [prefix + "b"]), RedisCommand("CLIENT", "ID")])
        _ = try await (first, second)
        #expect(client.openConnections == 2)

        // One command in flight while the server goes away: it fails, typed, and is not retried.
        let inFlight = Task { try await client.send("BLPOP", prefix + "never", 15) }
        try await Task.sleep(for: .milliseconds(300))
        try await Self.restartRedis()

        let error = try await #require(throws: RedisError.self) { try await inFlight.value }
        #expect(error.code == .connection)
        #expect(error.command == "BLPOP")

        // The next leases work: stale idle connections are noticed and replaced, and
        // the script is loaded again on the new connections.
        #expect(try await client.send("PING") == .status("PONG"))
        #expect(try await client.run(script, keys: [prefix + "a"]).int != nil)
        let replies = try await client.pipeline((0..<10).map { _ in .script(script, keys: [prefix + "c"]) })
        #expect(replies == (1...10).map { .integer(Int64($0)) })
        #expect(client.openConnections <= 2)
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    static func restartRedis() async throws {
        let status = try await runWithCleanSignals(
            TestEnvironment.repositoryRoot.appendingPathComponent("scripts/services").path, ["restart", "redis"])
        #expect(status == 0)
    }

    /// Runs a program with this process's environment and waits for it. Not through
    /// `Foundation.Process`: it passes the spawning thread's signal mask on, and the
    /// test runner's threads block SIGTERM, so a `redis-server` started that way
    /// would ignore the next `scripts/services stop`. Here the child starts with an
    /// empty mask and default handlers.
    static func runWithCleanSignals(_ path: String, _ arguments: [String]) async throws -> Int32 {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
            Thread.detachNewThread {
                var attributes = posix_spawnattr_t()
                posix_spawnattr_init(&attributes)
                defer { posix_spawnattr_destroy(&attributes) }
                var emptyMask = sigset_t()
                sigemptyset(&emptyMask)
                posix_spawnattr_setsigmask(&attributes, &emptyMask)
                var defaults = sigset_t()
                sigemptyset(&defaults)
                for signal in [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD] {
                    sigaddset(&defaults, signal)
                }
                posix_spawnattr_setsigdefault(&attributes, &defaults)
                posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

                var actions = posix_spawn_file_actions_t()
                posix_spawn_file_actions_init(&actions)
                defer { posix_spawn_file_actions_destroy(&actions) }
                posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)

                let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
                defer { argv.forEach { free($0) } }
                var pid: pid_t = 0
                let spawned = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
                guard spawned == 0 else {
                    continuation.resume(throwing: POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EINVAL))
                    return
                }
                var status: Int32 = 0
                while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
                // WIFEXITED / WEXITSTATUS are macros.
                let exited = status & 0x7f == 0
                continuation.resume(returning: exited ? (status >> 8) & 0xff : -1)
            }
        }
    }
}
