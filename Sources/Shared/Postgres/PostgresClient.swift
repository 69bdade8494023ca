/// The services' Postgres client: a bounded pool of `PostgresConnection`s.
///
/// Each call leases a connection for its duration. A connection the server closed
/// while it sat idle is noticed when it is leased (`PostgresConnection.isUsable`)
/// and replaced by a new one; one that breaks during a statement fails that
/// statement with `.connectionClosed` and is replaced afterwards.
public final class PostgresClient: Sendable {
    public struct Configuration: Sendable {
        /// libpq connection string or `postgresql://` URL (`DATABASE_URL`).
        public var url: String
        /// Shown in `pg_stat_activity.application_name`.
        public var applicationName: String
        public var maximumConnections: Int
        /// How long a caller waits for a free connection before `ConnectionPoolError.acquireTimeout`.
        public var acquireTimeout: Duration
        /// Seconds to wait for a new connection, unless the URL sets `connect_timeout`.
        public var connectTimeout: Int
        /// Statements running longer are cancelled by the server (none by default).
        public var statementTimeout: Duration?

        public init(
            url: String, applicationName: String = "pushgate", maximumConnections: Int = 10,
            acquireTimeout: Duration = .seconds(10), connectTimeout: Int = 10, statementTimeout: Duration? = nil
        ) {
            self.url = url
            self.applicationName = applicationName
            self.maximumConnections = maximumConnections
            self.acquireTimeout = acquireTimeout
            self.connectTimeout = connectTimeout
            self.statementTimeout = statementTimeout
        }
    }

    public let configuration: Configuration
    private let pool: ConnectionPool<PostgresConnection>

    public init(configuration: Configuration) {
        self.configuration = configuration
        pool = ConnectionPool(
            name: "postgres", maximumConnections: configuration.maximumConnections,
            acquireTimeout: configuration.acquireTimeout
        ) {
            try await PostgresConnection.connect(
                url: configuration.url, applicationName: configuration.applicationName,
                connectTimeout: configuration.connectTimeout, statementTimeout: configuration.statementTimeout)
        }
    }

    public convenience init(
        url: String, applicationName: String = "pushgate", maximumConnections: Int = 10,
        acquireTimeout: Duration = .seconds(10)
    ) {
        self.init(
            configuration: Configuration(
                url: url, applicationName: applicationName, maximumConnections: maximumConnections,
                acquireTimeout: acquireTimeout))
    }

    /// Runs a statement and returns its rows.
    public func query(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await pool.withConnection { try await $0.query(query) }
    }

    /// Runs a statement and returns the number of rows it affected.
    @discardableResult
    public func execute(_ query: PostgresQuery) async throws -> Int {
        try await pool.withConnection { try await $0.execute(query) }
    }

    /// Leases one connection for several statements.
    public func withConnection<Result: Sendable>(
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await pool.withConnection(body)
    }

    /// Runs `body` in a transaction on one leased connection: committed when `body`
    /// returns, rolled back when it throws.
    @discardableResult
    public func withTransaction<Result: Sendable>(
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await pool.withConnection { connection in
            try await connection.withTransaction(body)
        }
    }

    /// Connections currently open (leased or idle).
    public var openConnections: Int { pool.openConnections }

    /// Closes idle connections now and leased ones when they are returned.
    public func close() { pool.close() }
}
