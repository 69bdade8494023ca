import Foundation
import Synchronization

/// Commands from any number of tasks over one Redis connection, pipelined
/// automatically (as valkey-swift's connection or StackExchange.Redis's
/// multiplexer do): whatever callers submit while earlier commands are on the wire
/// goes out in one write, and Redis runs the whole batch per read. For a hot path
/// of many small independent commands this replaces a pool's "one command, one
/// round trip, one thread hop per connection" with a few syscalls per batch.
///
/// Only for self-contained commands: no `MULTI`/`WATCH`, `SUBSCRIBE`, `SELECT` or
/// blocking reads (`BLPOP`, `XREAD … BLOCK`), which would change or stall the
/// connection every caller shares. Use `RedisClient` for those.
///
/// Items of a `BatchHead` (a script run over a list) go further: those submitted
/// together leave as one command, and each caller gets its own element of the reply;
/// while two batched commands are unanswered, new items wait and leave together after
/// them, so batches grow with the load.
///
/// Contract:
/// * Replies come back to their own caller; an error reply of one command is
///   thrown to that caller only (`RedisError.Code.server`); so is an error element
///   of a batch item.
/// * Scripts (`RedisCommand.script`) are loaded when the connection first needs
///   them and reloaded after NOSCRIPT (see `RedisPipelineConnection`).
/// * When the connection is lost or times out, exactly the commands written or
///   queued on it and not yet answered fail (`.connection`, `.timeout`,
///   `.protocol`); none is retried (it may have run). The next command opens a new
///   connection. While connecting, commands wait for the outcome; if it fails they
///   fail with its error.
/// * After `close()`, every command fails with `.closed`.
///
/// The socket lives on an `EventLoop` thread (its own unless one is given); the
/// connect, `AUTH` and `SELECT` handshake reuses `RedisConnection` and then takes
/// over its socket.
public final class RedisMultiplexer: Sendable {
    public struct Options: Sendable {
        public var connectTimeout: Duration
        /// How long the oldest unanswered command may wait before the connection is given up.
        public var commandTimeout: Duration

        public init(connectTimeout: Duration = .seconds(3), commandTimeout: Duration = .seconds(5)) {
            self.connectTimeout = connectTimeout
            self.commandTimeout = commandTimeout
        }
    }

    typealias Request = RedisPipelineConnection.Request

    /// A caller's command, or an item that may share a command with others (`BatchHead`).
    enum Submission: Sendable {
        case request(Request)
        case item(BatchItem, completion: @Sendable (Result<RedisReply, RedisError>) -> Void)

        func fail(_ error: RedisError) {
            switch self {
            case .request(let request): request.fail(error)
            case .item(let item, let completion):
                Request(command: item.command, completion: completion).fail(error)
            }
        }
    }

    /// Submissions not yet taken by the loop, and whether a drain is already on its way.
    private struct Inbox {
        var submissions: [Submission] = []
        var drainScheduled = false
        var closed = false
    }

    public let url: RedisURL
    public let options: Options
    private let loop: EventLoop
    private let ownsLoop: Bool
    private let inbox = Mutex(Inbox())
    private let core: Core

    /// `eventLoop`: the loop that drives the socket; by default one of its own,
    /// stopped by `close()`.
    public init(url: RedisURL, options: Options = Options(), eventLoop: EventLoop? = nil, logger: Logger? = nil) {
        self.url = url
        self.options = options
        ownsLoop = eventLoop == nil
        loop = eventLoop ?? EventLoop(name: "pushgate.redis-multiplexer")
        let redisLogger = logger?.child(
            "redis", metadata: ["redis.endpoint": "\(url.host):\(url.port)/\(url.database)"])
        core = Core(url: url, options: options, loop: loop, logger: redisLogger)
    }

    /// Parses `REDIS_URL` (see `RedisURL`).
    public convenience init(url: String, options: Options = Options(), logger: Logger? = nil) throws(RedisError) {
        self.init(url: try RedisURL(url), options: options, logger: logger)
    }

    /// Sends one command; an error reply is thrown as `RedisError` (`.server(prefix)`).
    public func send(_ command: RedisCommand) async throws -> RedisReply {
        try await withCheckedThrowingContinuation { continuation in
            send(command) { continuation.resume(with: $0) }
        }
    }

    /// Sends one command and calls `completion` once with its reply, or with the error
    /// reply or failure as `.failure`. `completion` runs on the event loop's thread
    /// (or, when the multiplexer is closed, on the caller's): it must be quick and
    /// must not block, since every other reply waits behind it. For callers that can
    /// finish their work there without a task (a hot path saving two thread hops).
    public func send(_ command: RedisCommand, completion: @escaping @Sendable (Result<RedisReply, RedisError>) -> Void)
    {
        send(EncodedRedisCommand(command), completion: completion)
    }

    /// `send(_:completion:)` of a command already written in RESP.
    public func send(
        _ command: EncodedRedisCommand, completion: @escaping @Sendable (Result<RedisReply, RedisError>) -> Void
    ) {
        submit(.request(Request(command: command, completion: completion)))
    }

    /// Sends `item`, batched with the items of the same head submitted with it, and calls
    /// `completion` once with its own element of the reply (an error element, or a
    /// failure of the whole command, as `.failure`). Runs where `send(_:completion:)`'s
    /// completion runs.
    public func send(
        _ item: BatchItem, completion: @escaping @Sendable (Result<RedisReply, RedisError>) -> Void
    ) {
        submit(.item(item, completion: completion))
    }

    /// `send(_:completion:)` of one batch item.
    public func send(_ item: BatchItem) async throws -> RedisReply {
        try await withCheckedThrowingContinuation { continuation in
            send(item) { continuation.resume(with: $0) }
        }
    }

    /// `send(_:)` of a command already written in RESP.
    public func send(_ command: EncodedRedisCommand) async throws -> RedisReply {
        try await withCheckedThrowingContinuation { continuation in
            send(command) { continuation.resume(with: $0) }
        }
    }

    /// `send(RedisCommand(name, arguments…))`.
    public func send(_ name: String, _ arguments: any RedisValueConvertible...) async throws -> RedisReply {
        try await send(RedisCommand(name, arguments: arguments))
    }

    /// Runs a Lua script by SHA, loading it when the connection does not have it.
    public func run(
        _ script: RedisScript, keys: [any RedisValueConvertible] = [], arguments: [any RedisValueConvertible] = []
    ) async throws -> RedisReply {
        try await send(.script(script, keys: keys, arguments: arguments))
    }

    /// Fails what is in flight or waiting with `.closed`, closes the connection and,
    /// when the loop is the multiplexer's own, stops it (waiting briefly for its
    /// thread). Idempotent; call it once the last command was sent.
    public func close() {
        let first = inbox.withLock { inbox in
            defer { inbox.closed = true }
            return !inbox.closed
        }
        guard first else { return }
        loop.execute { [core] in core.shutDown() }
        if ownsLoop { loop.shutdown() }
    }

    /// Hands `submission` to the loop. Only the first submission after a drain wakes the
    /// loop; the ones behind it ride along, which is where the batching comes from.
    private func submit(_ submission: Submission) {
        let wake: Bool? = inbox.withLock { inbox in
            if inbox.closed { return nil }
            inbox.submissions.append(submission)
            if inbox.drainScheduled { return false }
            inbox.drainScheduled = true
            return true
        }
        switch wake {
        case nil: submission.fail(RedisError(code: .closed, message: "the Redis multiplexer is closed"))
        case true?:
            // From the loop's own thread (an HTTP server sharing it), the drain runs at
            // the end of this iteration: every push parsed in it leaves in one write,
            // and no wake-up is written.
            if loop.inEventLoop {
                loop.deferToEndOfIteration { [self] in drain() }
            } else {
                loop.execute { [self] in drain() }
            }
        case false?: break
        }
    }

    /// Loop thread: takes everything submitted so far, swapping in the spare buffer
    /// (moved out of `core` first, so it is uniquely referenced and appending to it
    /// does not copy): in the steady state neither array is reallocated.
    private func drain() {
        var batch: [Submission] = []
        swap(&batch, &core.spare)
        inbox.withLock { inbox in
            swap(&inbox.submissions, &batch)
            inbox.drainScheduled = false
        }
        core.accept(batch)
        batch.removeAll(keepingCapacity: true)
        core.spare = batch
    }

    /// The submissions as requests, in order: each run of consecutive items of one
    /// head becomes one request (at most the head's `maximumItems` items each), which
    /// calls `onAnswered` once its items have their answers.
    static func requests(_ submissions: [Submission], onAnswered: (@Sendable () -> Void)? = nil) -> [Request] {
        var requests: [Request] = []
        requests.reserveCapacity(submissions.count)
        var items: [BatchItem] = []
        var completions: [@Sendable (Result<RedisReply, RedisError>) -> Void] = []
        func flushItems() {
            guard !items.isEmpty else { return }
            requests.append(request(batching: items, completions: completions, onAnswered: onAnswered))
            items.removeAll(keepingCapacity: true)
            completions.removeAll(keepingCapacity: true)
        }
        for submission in submissions {
            switch submission {
            case .request(let request):
                flushItems()
                requests.append(request)
            case .item(let item, let completion):
                if let head = items.first?.head, head !== item.head || items.count == head.maximumItems {
                    flushItems()
                }
                items.append(item)
                completions.append(completion)
            }
        }
        flushItems()
        return requests
    }
}

extension RedisMultiplexer {
    /// The loop-side state: the current connection, or the callers waiting for one.
    ///
    /// Why @unchecked Sendable is safe: after `init`, every property is read and
    /// written only on `loop`'s thread (from `drain`, the connect task's completion
    /// submitted to the loop, and `shutDown`), so there is no concurrent access.
    fileprivate final class Core: @unchecked Sendable {
        let url: RedisURL
        let options: Options
        let loop: EventLoop
        let logger: Logger?
        var connection: RedisPipelineConnection?
        var connecting = false
        var waiting: [Request] = []
        var closed = false
        /// After a failed connect, requests fail at once with its error until this
        /// time (50 ms doubling to 1 s), instead of each batch trying again: a Redis
        /// that refuses connections is not hammered, nor the log flooded.
        var retryAfter: (time: ContinuousClock.Instant, error: RedisError)?
        var backoff: Duration = .zero
        let connectFailureLog: ThrottledLog?
        /// The empty array `drain` swaps into the inbox.
        var spare: [Submission] = []
        /// Batch items waiting for a batched command in flight to be answered.
        var held: [Submission] = []
        var batchesInFlight = 0
        /// Two, so Redis has the next batch at hand while the ingress reads the last one's answer.
        static let batchesInFlightLimit = 2

        init(url: RedisURL, options: Options, loop: EventLoop, logger: Logger?) {
            self.url = url
            self.options = options
            self.loop = loop
            self.logger = logger
            connectFailureLog = logger.map { ThrottledLog(logger: $0, interval: .seconds(5)) }
        }

        func dispatch(_ requests: [Request]) {
            guard !requests.isEmpty else { return }
            if closed {
                for request in requests {
                    request.fail(RedisError(code: .closed, message: "the Redis multiplexer is closed"))
                }
                return
            }
            if let connection, connection.isOpen {
                let now = ContinuousClock.now
                for request in requests { connection.enqueue(request, now: now) }
                connection.flush()
                return
            }
            if !connecting, let retryAfter {
                if ContinuousClock.now < retryAfter.time {
                    for request in requests { request.fail(retryAfter.error) }
                    return
                }
                self.retryAfter = nil
            }
            waiting.append(contentsOf: requests)
            if !connecting { connect() }
        }

        /// Opens a connection off the loop (hiredis connects blocking, on the
        /// connection's own queue) and hands the socket back to the loop.
        private func connect() {
            connecting = true
            let connectionOptions = RedisConnection.Options(
                connectTimeout: options.connectTimeout, commandTimeout: options.commandTimeout)
            Task { [self, url] in
                let result: Result<Int32, RedisError>
                do {
                    let handshake = try await RedisConnection.connect(to: url, options: connectionOptions)
                    result = .success(try await handshake.detachSocket())
                } catch let error as RedisError {
                    result = .failure(error)
                } catch {
                    result = .failure(RedisError(code: .connection, message: "could not connect: \(error)"))
                }
                // Dropped if the loop has stopped meanwhile (closed): the callers waiting
                // were already failed by `shutDown`; only the new socket leaks, at exit.
                loop.execute { [self] in connected(result) }
            }
        }

        private func connected(_ result: Result<Int32, RedisError>) {
            connecting = false
            let requests = waiting
            waiting = []
            switch result {
            case .failure(let error):
                connectFailureLog?.warning("could not connect", error: error)
                backoff = min(max(backoff * 2, .milliseconds(50)), .seconds(1))
                retryAfter = (ContinuousClock.now + backoff, error)
                for request in requests { request.fail(error) }
            case .success(let fd):
                if closed {
                    Glibc.close(fd)
                    for request in requests {
                        request.fail(RedisError(code: .closed, message: "the Redis multiplexer is closed"))
                    }
                    return
                }
                logger?.debug("connected")
                backoff = .zero
                let connection = RedisPipelineConnection(
                    fd: fd, endpoint: "\(url.host):\(url.port)/\(url.database)", loop: loop,
                    commandTimeout: options.commandTimeout
                ) { [weak self] lost in
                    if self?.connection === lost { self?.connection = nil }
                }
                self.connection = connection
                dispatch(requests)
            }
        }

        func shutDown() {
            closed = true
            let error = RedisError(code: .closed, message: "the Redis multiplexer is closed")
            connection?.close(failing: error)
            connection = nil
            for request in waiting { request.fail(error) }
            waiting = []
            for item in held { item.fail(error) }
            held = []
        }

        /// Commands leave at once; batch items leave at once too unless
        /// `batchesInFlightLimit` batched commands are already on their way. Then they
        /// wait for one of those to be answered and leave together: batches grow with
        /// the load (Redis pays its cost per script run and per read fewer times),
        /// and at low load nothing waits. Items may thereby pass commands submitted
        /// after them; each caller's own item and command stay in order, since a
        /// caller waits for one's answer before sending the next.
        func accept(_ submissions: [Submission]) {
            var requests: [Request] = []
            for submission in submissions {
                if case .request(let request) = submission {
                    requests.append(request)
                } else {
                    held.append(submission)
                }
            }
            dispatch(requests)
            releaseHeld()
        }

        private func releaseHeld() {
            guard batchesInFlight < Self.batchesInFlightLimit, !held.isEmpty else { return }
            let items = held
            held.removeAll(keepingCapacity: true)
            // Answers arrive on the loop's thread (or, once closed, in `shutDown` there).
            let requests = RedisMultiplexer.requests(items) { [self] in
                batchesInFlight -= 1
                releaseHeld()
            }
            batchesInFlight += requests.count
            dispatch(requests)
        }
    }
}
