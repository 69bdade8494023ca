import CHiredis
import Dispatch
import Foundation
import Synchronization

/// One connection to Redis over hiredis's blocking API.
///
/// Every hiredis call runs on the connection's own serial `DispatchQueue`, never on
/// the cooperative thread pool; the async methods hop onto it with a continuation.
/// A connection serves one caller at a time (lease it from `RedisClient`); after
/// any I/O, protocol or timeout failure it is broken for good (hiredis cannot
/// resynchronise replies) and `isUsable` turns false so the pool replaces it.
/// Nothing is retried here: a command whose connection failed may have run.
public final class RedisConnection: PoolableConnection, @unchecked Sendable {
    // Why @unchecked Sendable is safe: `context`, `knownScripts` and `currentTimeout` are only touched
    // inside blocks on `queue` (a serial queue), and in `deinit`, when no block can
    // be pending because each one retains `self`. Everything read from other
    // threads is immutable (`fd`, `endpoint`, `options`) or atomic (`broken`, `closed`).
    private let queue: DispatchQueue
    private var context: UnsafeMutablePointer<redisContext>?
    /// SHA-1s this connection has loaded with SCRIPT LOAD (cleared with the connection).
    private var knownScripts: Set<String> = []
    /// The socket timeout in force (for error messages).
    private var currentTimeout: Duration
    private let fd: Int32
    private let broken = Atomic<Bool>(false)
    private let closed = Atomic<Bool>(false)

    /// `host:port/db`, never the password.
    public let endpoint: String
    public let options: Options

    public struct Options: Sendable {
        /// Time allowed for the TCP connect.
        public var connectTimeout: Duration
        /// Time allowed for sending a command and reading its reply (socket send/receive timeout).
        public var commandTimeout: Duration

        public init(connectTimeout: Duration = .seconds(3), commandTimeout: Duration = .seconds(5)) {
            self.connectTimeout = connectTimeout
            self.commandTimeout = commandTimeout
        }
    }

    private init(queue: DispatchQueue, context: UnsafeMutablePointer<redisContext>, endpoint: String, options: Options)
    {
        self.queue = queue
        self.context = context
        self.fd = context.pointee.fd
        self.endpoint = endpoint
        self.options = options
        self.currentTimeout = options.commandTimeout
    }

    deinit {
        if let context { redisFree(context) }
    }

    /// Connects, then sends `AUTH` (when the URL has a password) and `SELECT` (when
    /// the database is not 0). Throws `RedisError` with code `.connection`,
    /// `.timeout`, `.authentication` or `.database`.
    public static func connect(to url: RedisURL, options: Options = Options()) async throws -> RedisConnection {
        let endpoint = "\(url.host):\(url.port)/\(url.database)"
        let queue = DispatchQueue(label: "pushgate.redis.\(endpoint)")
        return try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(
                    with: Result { () throws(RedisError) in
                        try Self.open(url: url, endpoint: endpoint, queue: queue, options: options)
                    })
            }
        }
    }

    /// Runs on `queue`.
    private static func open(url: RedisURL, endpoint: String, queue: DispatchQueue, options: Options) throws(RedisError)
        -> RedisConnection
    {
        guard
            let context = redisConnectWithTimeout(
                url.host, Int32(clamping: url.port), options.connectTimeout.hiredisTimeval)
        else {
            throw RedisError(code: .connection, message: "could not allocate a connection to \(endpoint)")
        }
        if context.pointee.err != 0 {
            let reason = Self.errorText(context)
            let timedOut = context.pointee.err == REDIS_ERR_IO && reason.localizedCaseInsensitiveContains("timed out")
            redisFree(context)
            throw RedisError(
                code: timedOut ? .timeout : .connection, message: "could not connect to \(endpoint): \(reason)")
        }
        let connection = RedisConnection(queue: queue, context: context, endpoint: endpoint, options: options)
        _ = redisSetTimeout(context, options.commandTimeout.hiredisTimeval)
        _ = redisEnableKeepAlive(context)

        if let password = url.password {
            let argv = [Array("AUTH".utf8)] + (url.username.map { [Array($0.utf8)] } ?? []) + [Array(password.utf8)]
            let reply = try connection.roundTrip([argv], names: ["AUTH"])[0]
            if case .error(let error) = reply {
                connection.closeNow()
                throw RedisError(
                    code: .authentication, message: "\(endpoint) refused the credentials: \(error.message)",
                    command: "AUTH", serverMessage: error.serverMessage)
            }
        }
        if url.database != 0 {
            let reply = try connection.roundTrip([[Array("SELECT".utf8), url.database.redisBytes]], names: ["SELECT"])[
                0]
            if case .error(let error) = reply {
                connection.closeNow()
                let code: RedisError.Code = error.serverPrefix == "NOAUTH" ? .authentication : .database
                throw RedisError(
                    code: code, message: "\(endpoint) refused database \(url.database): \(error.message)",
                    command: "SELECT", serverMessage: error.serverMessage)
            }
        }
        return connection
    }

    // MARK: PoolableConnection

    /// False once closed or broken, or when the idle socket is readable (the server
    /// closed it, or sent something nobody asked for). A zero-timeout `poll`, so it
    /// never blocks. Only meaningful while no command is in flight.
    public var isUsable: Bool {
        guard !closed.load(ordering: .acquiring), !broken.load(ordering: .acquiring) else { return false }
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, 0)
        return ready == 0
    }

    /// Frees the hiredis context (on the connection's queue, after anything in flight). Idempotent.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        queue.async { self.freeContext() }
    }

    /// Hands the connected (and authenticated, database selected) socket to the
    /// caller, who owns and closes it from then on; the hiredis context is freed
    /// without closing it and this connection is closed. Used by `RedisMultiplexer`,
    /// which reuses the connect/AUTH/SELECT handshake and then drives the socket
    /// itself, non-blocking.
    func detachSocket() async throws -> Int32 {
        try await onQueue { connection throws(RedisError) in
            guard !connection.closed.exchange(true, ordering: .acquiringAndReleasing), let context = connection.context
            else {
                throw RedisError(code: .closed, message: "the connection to \(connection.endpoint) is closed")
            }
            connection.context = nil
            return redisFreeKeepFd(context)
        }
    }

    // MARK: Commands

    /// Sends one command and returns its reply; an error reply is thrown as `RedisError`
    /// with code `.server(prefix)`. `timeout` replaces the command timeout for this
    /// call only, e.g. for `XREADGROUP … BLOCK` or `BLPOP`, which wait on purpose.
    public func send(_ command: RedisCommand, timeout: Duration? = nil) async throws -> RedisReply {
        try await pipeline([command], timeout: timeout)[0].throwingError()
    }

    public func send(_ name: String, _ arguments: any RedisValueConvertible...) async throws -> RedisReply {
        try await send(RedisCommand(name, arguments: arguments))
    }

    /// Sends one command (not a script) and hands its reply to `visitor` element by
    /// element as hiredis parses it, on the connection's queue: no reply tree is
    /// built. An error reply is thrown as `RedisError` (the visitor sees nothing of it).
    public func send(_ command: RedisCommand, timeout: Duration? = nil, visitor: any RedisReplyVisitor) async throws {
        precondition(command.script == nil, "scripts go through send(_:) (NOSCRIPT handling)")
        try await onQueue { connection throws(RedisError) in
            if let timeout { try connection.setTimeout(timeout) }
            do throws(RedisError) {
                try connection.roundTrip(command.argv, name: command.name, visitor: visitor)
            } catch {
                // An error reply leaves the connection in the pool: not with this timeout.
                if timeout != nil { try? connection.setTimeout(connection.options.commandTimeout) }
                throw error
            }
            if timeout != nil { try connection.setTimeout(connection.options.commandTimeout) }
        }
    }

    /// Runs a script by SHA (see `pipeline` for how NOSCRIPT is handled).
    public func run(
        _ script: RedisScript, keys: [any RedisValueConvertible] = [], arguments: [any RedisValueConvertible] = []
    ) async throws -> RedisReply {
        try await send(.script(script, keys: keys, arguments: arguments))
    }

    /// Writes all commands, then reads exactly one reply per command, in order.
    /// Error replies are returned as `.error` values; a broken connection throws
    /// (and none of the replies are returned).
    ///
    /// Scripts (`RedisCommand.script`) the connection has not loaded yet are loaded
    /// with `SCRIPT LOAD` in the same round trip, ahead of the commands. If the
    /// server still answers NOSCRIPT (its cache was flushed), the script is loaded
    /// and that command re-sent — it then runs after the pipeline's other commands.
    public func pipeline(_ commands: [RedisCommand], timeout: Duration? = nil) async throws -> [RedisReply] {
        if commands.isEmpty { return [] }
        let encoded = commands.map(EncodedRedisCommand.init)
        return try await onQueue { connection throws(RedisError) in
            guard let timeout else { return try connection.pipelineLoadingScripts(encoded) }
            try connection.setTimeout(timeout)
            let replies = try connection.pipelineLoadingScripts(encoded)
            try connection.setTimeout(connection.options.commandTimeout)
            return replies
        }
    }

    /// `pipeline(_:)` for commands already written in RESP: their bytes go to hiredis
    /// as they are, with no argv to build per argument; scripts are loaded alike.
    public func pipeline(encoded commands: [EncodedRedisCommand]) async throws -> [RedisReply] {
        if commands.isEmpty { return [] }
        return try await onQueue { connection throws(RedisError) in try connection.pipelineLoadingScripts(commands) }
    }

    /// `send(_:)` for a command already written in RESP (a script's `EVALSHA` included).
    public func send(encoded command: EncodedRedisCommand) async throws -> RedisReply {
        try await pipeline(encoded: [command])[0].throwingError()
    }

    // MARK: On the queue

    private func onQueue<T: Sendable>(_ body: @escaping @Sendable (RedisConnection) throws(RedisError) -> T)
        async throws -> T
    {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { () throws(RedisError) in try body(self) })
            }
        }
    }

    private func pipelineLoadingScripts(_ commands: [EncodedRedisCommand]) throws(RedisError) -> [RedisReply] {
        var unknown: [RedisScript] = []
        for script in commands.compactMap(\.script)
        where !knownScripts.contains(script.sha1) && !unknown.contains(script) {
            unknown.append(script)
        }
        let all = try roundTrip(encoded: unknown.map(Self.scriptLoad) + commands)
        for (script, reply) in zip(unknown, all) where reply == .bulk(Array(script.sha1.utf8)) {
            knownScripts.insert(script.sha1)
        }
        var replies = Array(all.dropFirst(unknown.count))
        defer { giveUpIfReplica(replies) }

        // NOSCRIPT despite the load: the script cache was flushed under us.
        let missing = replies.indices.filter {
            commands[$0].script != nil && replies[$0].error?.serverPrefix == "NOSCRIPT"
        }
        guard !missing.isEmpty else { return replies }
        var reloaded: [RedisScript] = []
        for index in missing {
            if let script = commands[index].script, !reloaded.contains(script) { reloaded.append(script) }
        }
        let again = try roundTrip(encoded: reloaded.map(Self.scriptLoad) + missing.map { commands[$0] })
        var loadFailures: [String: RedisReply] = [:]
        for (script, reply) in zip(reloaded, again) {
            if reply == .bulk(Array(script.sha1.utf8)) {
                knownScripts.insert(script.sha1)
            } else {
                loadFailures[script.sha1] = reply  // e.g. a compile error: report it rather than NOSCRIPT
            }
        }
        for (index, reply) in zip(missing, again.dropFirst(reloaded.count)) {
            let sha = commands[index].script!.sha1
            replies[index] = reply.error?.serverPrefix == "NOSCRIPT" ? (loadFailures[sha] ?? reply) : reply
        }
        return replies
    }

    /// Marks the connection broken (the pool then replaces it) when a reply says it
    /// reaches a read-only replica (`RedisReply.isFromReadOnlyReplica`). Runs on `queue`.
    private func giveUpIfReplica(_ replies: [RedisReply]) {
        if replies.contains(where: \.isFromReadOnlyReplica) { broken.store(true, ordering: .releasing) }
    }

    private static func scriptLoad(_ script: RedisScript) -> EncodedRedisCommand {
        EncodedRedisCommand(RedisCommand(argv: [Array("SCRIPT".utf8), Array("LOAD".utf8), Array(script.source.utf8)]))
    }

    /// Appends every command to hiredis's output buffer, then reads one reply per
    /// command (the first read flushes the buffer). Runs on `queue`.
    private func roundTrip(_ commands: [[[UInt8]]], names: [String]) throws(RedisError) -> [RedisReply] {
        guard !closed.load(ordering: .acquiring), let context else {
            throw RedisError(code: .closed, message: "the connection to \(endpoint) is closed", command: names.first)
        }
        guard !broken.load(ordering: .acquiring), context.pointee.err == 0 else {
            throw RedisError(
                code: .connection, message: "the connection to \(endpoint) is broken", command: names.first)
        }
        for argv in commands {
            let status = Self.withArgv(argv) { count, pointers, lengths in
                redisAppendCommandArgv(context, count, pointers, lengths)
            }
            if status != REDIS_OK { throw failure(context, command: names.first) }
        }
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for index in commands.indices {
            var raw: UnsafeMutableRawPointer?
            let status = redisGetReply(context, &raw)
            guard status == REDIS_OK, let raw else { throw failure(context, command: names[index], sent: true) }
            let reply = raw.assumingMemoryBound(to: redisReply.self)
            defer { freeReplyObject(raw) }
            replies.append(RedisReply(hiredis: reply, command: names[index]))
        }
        return replies
    }

    /// `roundTrip` of commands already in RESP. Runs on `queue`.
    private func roundTrip(encoded commands: [EncodedRedisCommand]) throws(RedisError) -> [RedisReply] {
        guard !closed.load(ordering: .acquiring), let context else {
            throw RedisError(
                code: .closed, message: "the connection to \(endpoint) is closed", command: commands.first?.name)
        }
        guard !broken.load(ordering: .acquiring), context.pointee.err == 0 else {
            throw RedisError(
                code: .connection, message: "the connection to \(endpoint) is broken", command: commands.first?.name)
        }
        for command in commands {
            let status = command.bytes.withUnsafeBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) {
                    redisAppendFormattedCommand(context, $0.baseAddress, $0.count)
                }
            }
            if status != REDIS_OK { throw failure(context, command: command.name) }
        }
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for command in commands {
            var raw: UnsafeMutableRawPointer?
            guard redisGetReply(context, &raw) == REDIS_OK, let raw else {
                throw failure(context, command: command.name, sent: true)
            }
            defer { freeReplyObject(raw) }
            replies.append(RedisReply(hiredis: raw.assumingMemoryBound(to: redisReply.self), command: command.name))
        }
        return replies
    }

    /// One command whose reply goes to `visitor` (hiredis's reader calls it instead
    /// of building reply objects, for this read only). Runs on `queue`.
    private func roundTrip(_ argv: [[UInt8]], name: String, visitor: any RedisReplyVisitor) throws(RedisError) {
        guard !closed.load(ordering: .acquiring), let context, let reader = context.pointee.reader else {
            throw RedisError(code: .closed, message: "the connection to \(endpoint) is closed", command: name)
        }
        guard !broken.load(ordering: .acquiring), context.pointee.err == 0 else {
            throw RedisError(code: .connection, message: "the connection to \(endpoint) is broken", command: name)
        }
        let status = Self.withArgv(argv) { count, pointers, lengths in
            redisAppendCommandArgv(context, count, pointers, lengths)
        }
        if status != REDIS_OK { throw failure(context, command: name) }
        let session = RedisVisitingReader.Session(visitor: visitor)
        let (savedFunctions, savedPrivdata) = (reader.pointee.fn, reader.pointee.privdata)
        reader.pointee.fn = RedisVisitingReader.functions
        reader.pointee.privdata = Unmanaged.passUnretained(session).toOpaque()
        var raw: UnsafeMutableRawPointer?
        let read = withExtendedLifetime(session) { redisGetReply(context, &raw) }
        // `raw` is a placeholder: nothing to free. After a failure the connection is
        // broken for good and keeps the visiting functions, so freeing the reader
        // never hands a half-read placeholder to `freeReplyObject`.
        guard read == REDIS_OK, raw != nil else { throw failure(context, command: name, sent: true) }
        reader.pointee.fn = savedFunctions
        reader.pointee.privdata = savedPrivdata
        if let error = session.error {
            let thrown = RedisError(serverReply: error, command: name)
            giveUpIfReplica([.error(thrown)])
            throw thrown
        }
    }

    /// Marks the connection broken and describes hiredis's error; `sent` when the
    /// command was written before it (`RedisError.mayHaveRun`). Runs on `queue`.
    private func failure(
        _ context: UnsafeMutablePointer<redisContext>, command: String?, sent: Bool = false
    ) -> RedisError {
        let savedErrno = errno
        broken.store(true, ordering: .releasing)
        let reason = Self.errorText(context)
        let code: RedisError.Code
        switch context.pointee.err {
        case REDIS_ERR_IO
        where savedErrno == EAGAIN || savedErrno == EWOULDBLOCK || reason.contains("temporarily unavailable"):
            code = .timeout
        case REDIS_ERR_PROTOCOL: code = .protocol
        default: code = .connection
        }
        let message =
            code == .timeout
            ? "\(endpoint) did not answer within \(currentTimeout)" : "connection to \(endpoint) failed: \(reason)"
        return RedisError(code: code, message: message, command: command, mayHaveRun: sent)
    }

    /// Runs on `queue`.
    private func setTimeout(_ timeout: Duration) throws(RedisError) {
        guard let context, redisSetTimeout(context, timeout.hiredisTimeval) == REDIS_OK else {
            broken.store(true, ordering: .releasing)
            throw RedisError(code: .connection, message: "could not set the socket timeout for \(endpoint)")
        }
        currentTimeout = timeout
    }

    private func closeNow() {
        closed.store(true, ordering: .releasing)
        freeContext()
    }

    private func freeContext() {
        if let context { redisFree(context) }
        context = nil
    }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { buffer in
            let bytes = buffer.prefix(while: { $0 != 0 })
            return bytes.isEmpty ? "unknown error" : String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Calls `body` with argc, argv pointers and lengths that stay valid for the call.
    private static func withArgv<R>(
        _ argv: [[UInt8]],
        _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R
    ) -> R {
        let lengths = argv.map(\.count)
        // hiredis copies the bytes while formatting, so one contiguous copy is enough.
        var storage: [UInt8] = []
        storage.reserveCapacity(lengths.reduce(0, +) + 1)
        for argument in argv { storage.append(contentsOf: argument) }
        storage.append(0)
        return storage.withUnsafeBufferPointer { bytes in
            let base = UnsafeRawPointer(bytes.baseAddress!).assumingMemoryBound(to: CChar.self)
            var pointers: [UnsafePointer<CChar>?] = []
            pointers.reserveCapacity(argv.count)
            var offset = 0
            for length in lengths {
                pointers.append(base + offset)
                offset += length
            }
            return pointers.withUnsafeMutableBufferPointer { pointerBuffer in
                lengths.withUnsafeBufferPointer { lengthBuffer in
                    body(Int32(argv.count), pointerBuffer.baseAddress!, lengthBuffer.baseAddress!)
                }
            }
        }
    }
}

extension Duration {
    /// As a `timeval` for hiredis (at least 1 ms: a zero timeout would mean "block forever").
    fileprivate var hiredisTimeval: timeval {
        let (seconds, attoseconds) = components
        let microseconds = attoseconds / 1_000_000_000_000
        if seconds <= 0 && microseconds < 1000 { return Glibc.timeval(tv_sec: 0, tv_usec: 1000) }
        return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(microseconds))
    }
}
