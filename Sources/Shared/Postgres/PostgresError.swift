/// An error from the Postgres client: a connection problem, an error the server
/// reported (with its SQLSTATE), or a value that could not be decoded.
///
/// `description` is safe to log: it never contains bound parameter values, the
/// connection string or its password. Server messages of SQLSTATE class 22 (data
/// exceptions such as `invalid input syntax for type integer: "…"`) echo the offending
/// input, so their text is kept out of `description`; it stays available in `message`.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// A connection could not be established.
        case connectionFailed
        /// The connection broke (server gone, socket closed) or was closed by us.
        case connectionClosed
        /// The server answered with an error; the SQLSTATE is attached (e.g. `23505`).
        case server(sqlState: String)
        /// A result value could not be decoded into the requested Swift type.
        case decoding
        /// A column name or index that the result does not have.
        case noSuchColumn
        /// A parameter the server cannot receive (e.g. a NUL character in text).
        case invalidParameter
        /// The server or libpq answered something the client did not expect.
        case unexpectedResult
    }

    public let code: Code
    /// The server's primary message, or libpq's / the client's message.
    public let message: String
    /// The constraint the server named (unique, foreign key, check violations).
    public let constraint: String?

    public init(code: Code, message: String, constraint: String? = nil) {
        self.code = code
        self.message = message
        self.constraint = constraint
    }

    /// The five-character SQLSTATE for server errors, nil otherwise.
    public var sqlState: String? {
        if case .server(let state) = code { return state }
        return nil
    }

    public var description: String {
        switch code {
        case .connectionFailed: "postgres: connection failed: \(message)"
        case .connectionClosed: "postgres: connection closed: \(message)"
        case .server(let state):
            if state.hasPrefix("22") {
                "postgres: server error \(state) (data exception; message withheld)"
            } else if let constraint {
                "postgres: server error \(state): \(message) (constraint \(constraint))"
            } else {
                "postgres: server error \(state): \(message)"
            }
        case .decoding: "postgres: decoding failed: \(message)"
        case .noSuchColumn: "postgres: no such column: \(message)"
        case .invalidParameter: "postgres: invalid parameter: \(message)"
        case .unexpectedResult: "postgres: unexpected result: \(message)"
        }
    }
}

extension PostgresError {
    /// SQLSTATE 23505.
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// A write refused because the server is a read-only standby (or the transaction
    /// is read-only): `read_only_sql_transaction`.
    public var isReadOnlyTransaction: Bool { sqlState == "25006" }
    /// SQLSTATE 23503.
    public var isForeignKeyViolation: Bool { sqlState == "23503" }
    /// A lock not granted within `lock_timeout`: `lock_not_available`.
    public var isLockNotAvailable: Bool { sqlState == "55P03" }
    /// A table that does not exist (a schema never migrated): `undefined_table`.
    public var isUndefinedTable: Bool { sqlState == "42P01" }
}
