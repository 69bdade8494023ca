import Foundation

/// Starting helper programs (scripts, servers) from tests.
package enum CleanProcess {
    /// Runs a program with this process's environment and waits for it. Not through
    /// `Foundation.Process`: it passes the spawning thread's signal mask on, and the
    /// test runner's threads block SIGTERM, so a `redis-server` started that way
    /// would ignore the next `scripts/services stop`. Here the child starts with an
    /// empty mask and default handlers.
    package static func run(_ path: String, _ arguments: [String]) async throws -> Int32 {
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
