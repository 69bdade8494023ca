import CShims
import Foundation
import Glibc
import Synchronization

/// A helper program started from a test (a script, a server, the project's own
/// executables), through `posix_spawn` rather than `Foundation.Process`, for two
/// reasons:
/// - `Process` passes the spawning thread's signal mask on, and the test runner's
///   threads block SIGTERM, so a `redis-server` started that way would ignore the
///   next `scripts/services stop`, and a server's own SIGTERM or SIGHUP handling
///   could not be tested. Here the child starts with an empty mask and default
///   handlers.
/// - `Process.run()` on Linux (swift-corelibs-foundation up to 6.3) sometimes reads
///   past a buffer while listing `/proc/self/fd` and crashes the whole test run
///   (seen here; fixed upstream in swift-corelibs-foundation#5472).
///
/// A child still running when its `SpawnedProcess` goes away is killed and reaped.
package final class SpawnedProcess: Sendable {
    /// Where the child's standard output or error goes.
    package enum Output: Sendable {
        /// `/dev/null`.
        case discarded
        /// This process's own.
        case inherited
        /// A file, made or emptied.
        case file(String)
        /// A pipe this process reads (`standardOutput`, `standardError`).
        case pipe
    }

    /// How the child ended.
    package struct Termination: Sendable, Equatable {
        /// It exited (rather than being ended by a signal).
        package let exited: Bool
        /// The exit status, or the signal's number.
        package let status: Int32

        package init(exited: Bool, status: Int32) {
            self.exited = exited
            self.status = status
        }

        /// The exit status, or -1 when a signal ended it.
        package var exitStatus: Int32 { exited ? status : -1 }
    }

    package let pid: pid_t
    /// The read ends of `.pipe` outputs.
    package let standardOutput: FileHandle?
    package let standardError: FileHandle?
    /// How it ended, once reaped.
    private let termination = Mutex<Termination?>(nil)
    /// Held while reaping: a second reaper waits for the first's answer.
    private let reaping = Mutex<Void>(())

    /// Starts `path`. Standard input is empty; `environment` is the child's whole
    /// environment (this process's when nil).
    package init(
        _ path: String, _ arguments: [String], environment: [String: String]? = nil,
        standardOutput: Output = .discarded, standardError: Output = .inherited
    ) throws {
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
        var pipes: [Int32: (read: Int32, write: Int32)] = [:]
        defer { for ends in pipes.values { close(ends.write) } }
        for (descriptor, output) in [(Int32(1), standardOutput), (2, standardError)] {
            switch output {
            case .discarded: posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_WRONLY, 0)
            case .inherited: break
            case .file(let path):
                posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            case .pipe:
                var ends: [Int32] = [0, 0]
                guard pipe(&ends) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                pipes[descriptor] = (ends[0], ends[1])
                posix_spawn_file_actions_adddup2(&actions, ends[1], descriptor)
            }
        }
        // Nothing else of this process's: a child holding another child's pipe open
        // would keep its reader from ever seeing the end.
        pg_shim_spawn_close_from(&actions, 3)

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
        let readEnd = { (descriptor: Int32) in
            pipes[descriptor].map { FileHandle(fileDescriptor: $0.read, closeOnDealloc: true) }
        }
        self.standardOutput = readEnd(1)
        self.standardError = readEnd(2)
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EINVAL) }
        self.pid = pid
    }

    /// Runs `path` to its end; see `init` for the outputs. Waited for on a thread of
    /// its own (a test blocking one of the few cooperative threads could starve the
    /// in-process servers it talks to). The exit status, or -1 when a signal ended it.
    @discardableResult
    package static func run(
        _ path: String, _ arguments: [String], environment: [String: String]? = nil,
        standardOutput: Output = .discarded, standardError: Output = .inherited
    ) async throws -> Int32 {
        let child = try SpawnedProcess(
            path, arguments, environment: environment, standardOutput: standardOutput, standardError: standardError)
        return await child.waitForExit().exitStatus
    }

    package func signal(_ number: Int32) { Glibc.kill(pid, number) }

    /// Whether it has not ended yet (without reaping it).
    package var isRunning: Bool {
        if termination.withLock({ $0 }) != nil { return false }
        var info = siginfo_t()
        // Being reaped meanwhile fails with ECHILD: ended.
        guard waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 else { return false }
        return info.si_signo == 0  // nothing to report: still running
    }

    /// Waits for it to end, on a thread of its own.
    package func waitForExit() async -> Termination {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: self.reap()) }
        }
    }

    /// SIGKILL, then reaps it.
    package func kill() {
        signal(SIGKILL)
        _ = reap()
    }

    /// The first text it writes to its standard output (a server's ready line), or
    /// "" when it closes it first; read on a thread of its own.
    package func firstOutput() async -> String {
        guard let standardOutput else { preconditionFailure("standard output is not a pipe") }
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: String(decoding: standardOutput.availableData, as: UTF8.self))
            }
        }
    }

    /// Blocks until it ends. Reaping twice would find no child (or, with the pid
    /// reused, another one): the status is kept.
    private func reap() -> Termination {
        reaping.withLock { _ in
            if let kept = termination.withLock({ $0 }) { return kept }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            // WIFEXITED, WEXITSTATUS and WTERMSIG are macros.
            let signaled = status & 0x7f
            let ended = Termination(exited: signaled == 0, status: signaled == 0 ? (status >> 8) & 0xff : signaled)
            termination.withLock { $0 = ended }
            return ended
        }
    }

    deinit {
        if isRunning { kill() }
    }
}
