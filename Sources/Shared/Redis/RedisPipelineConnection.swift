import CHiredis
import Foundation

/// One Redis connection driven from an `EventLoop` over a non-blocking socket,
/// pipelined automatically: commands enqueued while earlier ones are on the wire
/// leave together in the next write, and since Redis answers in the order it
/// reads, replies are matched to their callers first-in, first-out.
///
/// Replies are parsed by hiredis's stand-alone RESP reader (`redisReader`), the
/// same parser the blocking `RedisConnection` uses; commands are written by
/// `RESPEncoder`.
///
/// Scripts are loaded per connection: the first `EVALSHA` of a script the
/// connection has not loaded is preceded, in the same write, by `SCRIPT LOAD`. A
/// NOSCRIPT reply (the server's script cache was flushed) reloads the script and
/// re-sends that command once; it then runs after the commands already sent.
///
/// Failure is final: when the peer closes, the socket errors, a reply cannot be
/// parsed, or the oldest unanswered command waited longer than `commandTimeout`,
/// every command sent or queued on this connection and not yet answered fails
/// with a `RedisError` (`.connection`, `.protocol`, `.timeout`) — never a reply —
/// and the owner is told through `onClose`. Nothing is retried: a command that
/// was written may have run.
///
/// Loop-thread only: every method, and the `EventLoopSelectable` callbacks, run on
/// `loop`'s thread, so the state needs no lock.
final class RedisPipelineConnection: EventLoopSelectable {
    /// A command of a caller, answered by calling `completion` once, on the loop's thread.
    struct Request: Sendable {
        let command: EncodedRedisCommand
        /// Receives the reply, or an error reply or failure as `.failure`.
        let completion: @Sendable (Result<RedisReply, RedisError>) -> Void

        func succeed(_ reply: RedisReply) {
            if case .error(let error) = reply {
                completion(.failure(error))
            } else {
                completion(.success(reply))
            }
        }

        /// `mayHaveRun`: the command was (or may have been) written before the failure.
        func fail(_ error: RedisError, mayHaveRun: Bool = false) {
            completion(
                .failure(
                    RedisError(
                        code: error.code, message: error.message, command: command.name, mayHaveRun: mayHaveRun)))
        }
    }

    /// What the next reply on the wire answers.
    private struct Awaited {
        enum Kind {
            case request(Request, retried: Bool)
            /// A `SCRIPT LOAD` sent ahead of a script's first `EVALSHA`.
            case scriptLoad(RedisScript)
        }
        let kind: Kind
        let sentAt: ContinuousClock.Instant
    }

    let endpoint: String
    private let fd: Int32
    private let loop: EventLoop
    private let commandTimeout: Duration
    private let onClose: (RedisPipelineConnection) -> Void
    private let reader: UnsafeMutablePointer<redisReader>
    private let readBuffer: UnsafeMutableRawBufferPointer
    /// Encoded commands not yet (fully) written; `outboundWritten` bytes of it are.
    private var outbound: [UInt8] = []
    private var outboundWritten = 0
    private var awaited = FIFOQueue<Awaited>()
    private var knownScripts: Set<String> = []
    private var loadingScripts: Set<String> = []
    /// The error of a script's last failed `SCRIPT LOAD`, answered instead of a second NOSCRIPT.
    private var loadFailures: [String: RedisError] = [:]
    private var watchingWritable = false
    private var timeoutArmed = false
    private(set) var isOpen = true

    static let readChunk = 64 * 1024

    /// Takes ownership of `fd` (connected, authenticated, database selected; made
    /// non-blocking here) and starts watching it. Loop thread.
    init(
        fd: Int32, endpoint: String, loop: EventLoop, commandTimeout: Duration,
        onClose: @escaping (RedisPipelineConnection) -> Void
    ) {
        self.fd = fd
        self.endpoint = endpoint
        self.loop = loop
        self.commandTimeout = commandTimeout
        self.onClose = onClose
        reader = redisReaderCreate()
        readBuffer = .allocate(byteCount: Self.readChunk, alignment: 16)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        loop.register(fd, interest: .read, handler: self)
    }

    deinit {
        redisReaderFree(reader)
        readBuffer.deallocate()
    }

    /// Encodes `request` behind what is already queued; `flush()` writes it.
    func enqueue(_ request: Request, now: ContinuousClock.Instant) {
        enqueue(request, retried: false, now: now)
    }

    private func enqueue(_ request: Request, retried: Bool, now: ContinuousClock.Instant) {
        guard isOpen else {
            request.fail(closedError)
            return
        }
        if let script = request.command.script, !knownScripts.contains(script.sha1),
            !loadingScripts.contains(script.sha1)
        {
            loadingScripts.insert(script.sha1)
            RESPEncoder.append([Array("SCRIPT".utf8), Array("LOAD".utf8), Array(script.source.utf8)], to: &outbound)
            awaited.append(Awaited(kind: .scriptLoad(script), sentAt: now))
        }
        outbound.append(contentsOf: request.command.bytes)
        awaited.append(Awaited(kind: .request(request, retried: retried), sentAt: now))
        armTimeout()
    }

    /// Writes as much of the queued commands as the socket takes; the rest goes
    /// when it is writable again.
    func flush() {
        guard isOpen else { return }
        while outboundWritten < outbound.count {
            let written = outbound.withUnsafeBytes { bytes in
                send(fd, bytes.baseAddress! + outboundWritten, bytes.count - outboundWritten, Int32(MSG_NOSIGNAL))
            }
            if written >= 0 {
                outboundWritten += written
                continue
            }
            let code = errno
            if code == EINTR { continue }
            if code == EAGAIN || code == EWOULDBLOCK {
                if !watchingWritable {
                    watchingWritable = true
                    loop.reregister(fd, interest: [.read, .write])
                }
                return
            }
            close(
                failing: RedisError(code: .connection, message: "write to \(endpoint) failed: \(Self.describe(code))"))
            return
        }
        outbound.removeAll(keepingCapacity: outbound.capacity <= 1 << 20)
        outboundWritten = 0
        if watchingWritable {
            watchingWritable = false
            loop.reregister(fd, interest: .read)
        }
    }

    /// Fails everything unanswered with `error` and closes the socket. Idempotent.
    func close(failing error: RedisError) {
        guard isOpen else { return }
        isOpen = false
        loop.unregister(fd)
        Glibc.close(fd)
        outbound = []
        outboundWritten = 0
        // Each may have been written (whole or in part) before the failure.
        for entry in awaited.removeAll() {
            if case .request(let request, _) = entry.kind { request.fail(error, mayHaveRun: true) }
        }
        onClose(self)
    }

    // MARK: EventLoopSelectable

    func readable() {
        guard isOpen else { return }
        var failure: RedisError?
        while true {
            let count = recv(fd, readBuffer.baseAddress, readBuffer.count, 0)
            if count > 0 {
                redisReaderFeed(reader, readBuffer.baseAddress!.assumingMemoryBound(to: CChar.self), count)
                if count < readBuffer.count { break }  // drained; epoll is level-triggered anyway
                continue
            }
            if count == 0 {
                failure = RedisError(code: .connection, message: "\(endpoint) closed the connection")
                break
            }
            let code = errno
            if code == EINTR { continue }
            if code != EAGAIN && code != EWOULDBLOCK {
                failure = RedisError(
                    code: .connection, message: "connection to \(endpoint) failed: \(Self.describe(code))")
            }
            break
        }
        // Replies that arrived before a failure are real answers: deliver them first.
        deliverReplies()
        if let failure {
            close(failing: failure)
        } else {
            flush()  // NOSCRIPT retries
        }
    }

    func writable() { flush() }

    func hangUp() {
        readable()
        close(failing: RedisError(code: .connection, message: "connection to \(endpoint) hung up"))
    }

    // MARK: Replies

    private func deliverReplies() {
        while isOpen {
            var raw: UnsafeMutableRawPointer?
            guard redisReaderGetReply(reader, &raw) == REDIS_OK else {
                close(failing: RedisError(code: .protocol, message: "\(endpoint) sent something that is not RESP"))
                return
            }
            guard let raw else { return }
            defer { freeReplyObject(raw) }
            guard let entry = awaited.popFirst() else {
                close(failing: RedisError(code: .protocol, message: "\(endpoint) sent a reply nobody asked for"))
                return
            }
            let reply = raw.assumingMemoryBound(to: redisReply.self)
            switch entry.kind {
            case .scriptLoad(let script):
                scriptLoaded(script, RedisReply(hiredis: reply, command: "SCRIPT"))
            case .request(let request, let retried):
                answer(request, retried: retried, RedisReply(hiredis: reply, command: request.command.name))
            }
        }
    }

    private func scriptLoaded(_ script: RedisScript, _ reply: RedisReply) {
        loadingScripts.remove(script.sha1)
        if reply == .bulk(Array(script.sha1.utf8)) {
            knownScripts.insert(script.sha1)
            loadFailures[script.sha1] = nil
        } else {
            loadFailures[script.sha1] =
                reply.error
                ?? RedisError(
                    code: .unexpectedReply, message: "SCRIPT LOAD answered an unexpected reply", command: "SCRIPT")
        }
    }

    private func answer(_ request: Request, retried: Bool, _ reply: RedisReply) {
        if let script = request.command.script, reply.error?.serverPrefix == "NOSCRIPT" {
            // The server's script cache was flushed: load again and re-send, once.
            knownScripts.remove(script.sha1)
            if !retried {
                enqueue(request, retried: true, now: .now)
                return
            }
            if let failure = loadFailures[script.sha1] {
                request.succeed(.error(failure))
                return
            }
        }
        request.succeed(reply)
        if reply.isFromReadOnlyReplica {
            // A replica (the former primary, after a failover): what is still in flight
            // here fails, and the multiplexer connects again, to the primary now named.
            close(failing: RedisError(code: .connection, message: "\(endpoint) is a read-only replica"))
        }
    }

    // MARK: Timeout

    /// Watches the oldest unanswered command: if it waits past `commandTimeout`,
    /// the server is stuck or gone and the connection is given up.
    private func armTimeout() {
        guard !timeoutArmed, isOpen, let oldest = awaited.first else { return }
        timeoutArmed = true
        let delay = max(oldest.sentAt + commandTimeout - .now, .milliseconds(1))
        loop.schedule(after: delay) { [weak self] in self?.checkTimeout() }
    }

    private func checkTimeout() {
        timeoutArmed = false
        guard isOpen, let oldest = awaited.first else { return }
        if ContinuousClock.now - oldest.sentAt >= commandTimeout {
            close(failing: RedisError(code: .timeout, message: "\(endpoint) did not answer within \(commandTimeout)"))
        } else {
            armTimeout()
        }
    }

    private var closedError: RedisError {
        RedisError(code: .connection, message: "the connection to \(endpoint) is closed")
    }

    private static func describe(_ code: Int32) -> String { String(cString: strerror(code)) }
}
