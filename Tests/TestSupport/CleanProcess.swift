import Foundation

/// Starting helper programs (scripts, servers, the project's own tools) from tests,
/// through `posix_spawn` rather than `Foundation.Process`, for two reasons:
/// - `Process` passes the spawning thread's signal mask on, and the test runner's
///   threads block SIGTERM, so a `redis-server` started that way would ignore the
///   next `scripts/services stop`. Here the child starts with an empty mask and
///   default handlers.
/// - `Process.run()` on Linux (swift-corelibs-foundation up to 6.3) sometimes reads
///   past a buffer while listing `/proc/self/fd` and crashes the whole test run
///   (seen here once; fixed upstream in swift-corelibs-foundation#5472).
package enum CleanProcess {
    /// Runs `path` and waits for it, on a thread of its own (a test blocking one of
    /// the few cooperative threads could starve the in-process servers it talks to).
    /// Standard input is empty; standard output goes to `standardOutput` and standard
    /// error to `standardError` (files, made or emptied), or `/dev/null` and this
    /// process's own when nil. `environment` is the child's whole environment (this
    /// process's when nil). The exit status, or -1 when a signal ended it.
    package static func run(
        _ path: String, _ arguments: [String], environment: [String: String]? = nil,
        standardOutput: String? = nil, standardError: String? = nil
    ) async throws -> Int32 {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int32, any Error>) in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        try runBlocking(
                            path, arguments, environment: environment, standardOutput: standardOutput,
                            standardError: standardError)
                    })
            }
        }
    }

    private static func runBlocking(
        _ path: String, _ arguments: [String], environment: [String: String]?, standardOutput: String?,
        standardError: String?
    ) throws -> Int32 {
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
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(
            &actions, 1, standardOutput ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if let standardError {
            posix_spawn_file_actions_addopen(&actions, 2, standardError, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        }

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map {
            $0.map { strdup("\($0.key)=\($0.value)") } + [nil]
        }
        defer { envp?.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned =
            if var envp {
                posix_spawn(&pid, path, &actions, &attributes, argv, &envp)
            } else {
                posix_spawn(&pid, path, &actions, &attributes, argv, environ)
            }
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EINVAL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS are macros.
        let exited = status & 0x7f == 0
        return exited ? (status >> 8) & 0xff : -1
    }
}
