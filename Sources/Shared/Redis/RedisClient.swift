/// The Redis client both services share: a bounded pool of `RedisConnection`s.
///
/// A connection that broke (server restarted, timeout, protocol error) is
/// discarded when it comes back to the pool, and one the server closed while it
/// sat idle is noticed before it is leased again, so the next lease after a Redis
/// restart gets a fresh connection. The command that was in flight when the
/// connection broke fails with `.connection`/`.timeout` and is never retried here:
/// it may have run, and only the caller knows whether running it twice is safe.
public final class RedisClient: Sendable {
    public struct Options: Sendable {
        public var maximumConnections: Int
        /// How long a caller waits for a free connection before `ConnectionPoolError.acquireTimeout`.
        public var acquireTimeout: Duration
        public var connection: RedisConnection.Options

        public init(
            maximumConnections: Int = 8, acquireTimeout: Duration = .seconds(5),
            connection: RedisConnection.Options = RedisConnection.Options()
        ) {
            self.maximumConnections = maximumConnections
            self.acquireTimeout = acquireTimeout
            self.connection = connection
        }
    }

    public let url: RedisURL
    public let options: Options
    private let pool: ConnectionPool<RedisConnection>

    public init(url: RedisURL, options: Options = Options(), logger: Logger? = nil) {
        self.url = url
        self.options = options
        let redisLogger = logger?.child(
            "redis", metadata: ["redis.endpoint": "\(url.host):\(url.port)/\(url.database)"])
        // While Redis is down every request tries a connection: one line per 5 s, not per try.
        let connectFailureLog = redisLogger.map { ThrottledLog(logger: $0, interval: .seconds(5)) }
        pool = ConnectionPool(
            name: "redis", maximumConnections: options.maximumConnections, acquireTimeout: options.acquireTimeout
        ) { [url, options] in
            do {
                let connection = try await RedisConnection.connect(to: url, options: options.connection)
                redisLogger?.debug("connected")
                return connection
            } catch {
                connectFailureLog?.warning("could not connect", error: error)
                throw error
            }
        }
    }

    /// Parses `REDIS_URL` (see `RedisURL`).
    public convenience init(url: String, options: Options = Options(), logger: Logger? = nil) throws(RedisError) {
        self.init(url: try RedisURL(url), options: options, logger: logger)
    }

    /// Leases one connection for several commands (e.g. a `WATCH`/`MULTI`/`EXEC`
    /// block). Do not keep it beyond `body`, and hand it back as it was: it goes
    /// back to the pool, so no open `MULTI`, `SUBSCRIBE` or `SELECT` of another
    /// database (if `body` throws half-way through a `MULTI`, send `DISCARD`).
    public func withConnection<Result: Sendable>(_ body: (RedisConnection) async throws -> Result) async throws
        -> Result
    {
        try await pool.withConnection(body)
    }

    /// Sends one command; an error reply is thrown as `RedisError` (`.server(prefix)`).
    /// `timeout` replaces the command timeout for this call (blocking reads).
    public func send(_ command: RedisCommand, timeout: Duration? = nil) async throws -> RedisReply {
        try await withConnection { try await $0.send(command, timeout: timeout) }
    }

    /// Sends one command (not a script) whose reply goes to `visitor` as it is parsed
    /// (see `RedisConnection.send(_:timeout:visitor:)`).
    public func send(_ command: RedisCommand, timeout: Duration? = nil, visitor: any RedisReplyVisitor) async throws {
        try await withConnection { try await $0.send(command, timeout: timeout, visitor: visitor) }
    }

    /// `send(RedisCommand(name, arguments…))`.
    public func send(_ name: String, _ arguments: any RedisValueConvertible...) async throws -> RedisReply {
        try await send(RedisCommand(name, arguments: arguments))
    }

    /// Sends a command given as raw argv (binary safe).
    public func send(argv: [[UInt8]]) async throws -> RedisReply {
        try await send(RedisCommand(argv: argv))
    }

    /// Sends the commands in one write and returns one reply per command, in order;
    /// error replies are `.error` values (see `RedisConnection.pipeline`).
    public func pipeline(_ commands: [RedisCommand]) async throws -> [RedisReply] {
        try await withConnection { try await $0.pipeline(commands) }
    }

    /// `pipeline(_:)` for commands already written in RESP (no scripts).
    public func pipeline(encoded commands: [EncodedRedisCommand]) async throws -> [RedisReply] {
        try await withConnection { try await $0.pipeline(encoded: commands) }
    }

    /// `send(_:)` for a command already written in RESP, a script's `EVALSHA` included
    /// (loaded as `run(_:keys:arguments:)` loads it).
    public func send(encoded command: EncodedRedisCommand) async throws -> RedisReply {
        try await withConnection { try await $0.send(encoded: command) }
    }

    /// Runs a Lua script by SHA, loading it transparently when the server does not
    /// have it (first use on a connection, or after `SCRIPT FLUSH`).
    public func run(
        _ script: RedisScript, keys: [any RedisValueConvertible] = [], arguments: [any RedisValueConvertible] = []
    ) async throws -> RedisReply {
        try await send(.script(script, keys: keys, arguments: arguments))
    }

    /// Connections currently open (leased or idle).
    public var openConnections: Int { pool.openConnections }

    /// Closes idle connections now and leased ones when they are returned.
    public func close() {
        pool.close()
    }
}
