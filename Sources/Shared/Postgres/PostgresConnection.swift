import CLibPQ
import Dispatch
import Foundation

/// One libpq connection (`PGconn*`).
///
/// libpq calls block, so they never run on the cooperative thread pool: the handle
/// is confined to this connection's serial `DispatchQueue`, and the async methods
/// hop onto it with a continuation. Use it through `PostgresClient` (which pools
/// connections); one connection runs one statement at a time.
public final class PostgresConnection: PoolableConnection, @unchecked Sendable {
    // @unchecked Sendable: every mutable field below (`handle`, `preparedStatements`)
    // is read and written only on `queue`, a serial queue, so no two threads touch
    // them at once; libpq allows a PGconn to be used from any thread as long as
    // calls are not concurrent.
    private let queue: DispatchQueue
    private var handle: OpaquePointer?
    /// Prepared statements on this connection: key (name, SQL, parameter types) → server-side name.
    private var preparedStatements: [String: String] = [:]
    /// Set when the server refused a write as a read-only standby (SQLSTATE 25006):
    /// after a failover, the endpoint's former primary. The pool then replaces the
    /// connection, and the new one reaches whatever primary the endpoint names now.
    private var reachesStandby = false

    /// The server process id of this connection (for `pg_stat_activity`, `pg_terminate_backend`).
    public let backendPID: Int32

    private init(handle: OpaquePointer, queue: DispatchQueue) {
        self.handle = handle
        self.queue = queue
        self.backendPID = PQbackendPID(handle)
    }

    deinit {
        // No other reference exists any more, so no queue hop is needed.
        if let handle { PQfinish(handle) }
    }

    /// Opens a connection.
    ///
    /// - Parameters:
    ///   - url: a libpq connection string (`host=… dbname=…`) or `postgresql://` URL.
    ///   - applicationName: reported in `pg_stat_activity.application_name`; overrides the URL's.
    ///   - connectTimeout: seconds; used unless the URL sets `connect_timeout`.
    ///   - statementTimeout: the server cancels any statement of this connection that
    ///     runs longer (`statement_timeout`, waiting for locks included).
    public static func connect(
        url: String, applicationName: String? = nil, connectTimeout: Int = 10, statementTimeout: Duration? = nil
    ) async throws -> PostgresConnection {
        let queue = DispatchQueue(label: "pushgate.postgres.connection")
        // Later keywords override the ones the expanded `dbname` URL/string sets; earlier
        // ones are defaults it can override.
        var parameters: [(String, String)] = [("connect_timeout", String(connectTimeout)), ("dbname", url)]
        if let applicationName { parameters.append(("application_name", applicationName)) }
        parameters.append(("client_encoding", "UTF8"))
        let keywordValues = parameters
        let handle: OpaquePointer = try await withCheckedThrowingContinuation { continuation in
            queue.async {
                continuation.resume(with: Result { try openHandle(keywordValues, url: url) })
            }
        }
        let connection = PostgresConnection(handle: handle, queue: queue)
        if let statementTimeout {
            // Set apart from the URL's own `options`, which a keyword here would replace.
            let milliseconds = max(Int((statementTimeout / .milliseconds(1)).rounded(.up)), 1)
            do {
                try await connection.executeScript("SET statement_timeout = \(milliseconds)")
            } catch {
                connection.close()
                throw error
            }
        }
        return connection
    }

    private static func openHandle(_ parameters: [(String, String)], url: String) throws -> OpaquePointer {
        let keywords = parameters.map { strdup($0.0) }
        let values = parameters.map { strdup($0.1) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        let handle = (keywords.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { keywordPointers in
            (values.map { UnsafePointer($0) } + [nil]).withUnsafeBufferPointer { valuePointers in
                PQconnectdbParams(keywordPointers.baseAddress, valuePointers.baseAddress, 1)
            }
        }
        guard let handle else {
            throw PostgresError(code: .connectionFailed, message: "out of memory")
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = scrubPassword(errorMessage(handle), connectionString: url)
            PQfinish(handle)
            throw PostgresError(code: .connectionFailed, message: message)
        }
        // libpq prints notices (e.g. "relation … already exists, skipping") to stderr by
        // default; they are informational, and our logs are JSON lines, so drop them.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        return handle
    }

    /// Closes the connection (PQfinish). Idempotent.
    public func close() {
        queue.sync {
            if let handle {
                PQfinish(handle)
                self.handle = nil
                preparedStatements.removeAll()
            }
        }
    }

    /// Cheap, non-blocking health check used by the pool: the connection is open, not
    /// inside a transaction, and the server has not sent anything while it sat idle.
    /// A backend killed by `pg_terminate_backend` or a server restart sends a FATAL
    /// error and closes the socket, which a zero-timeout `poll` sees as readable.
    public var isUsable: Bool {
        queue.sync {
            guard let handle, !reachesStandby, PQstatus(handle) == CONNECTION_OK,
                PQtransactionStatus(handle) == PQTRANS_IDLE
            else {
                return false
            }
            let socket = PQsocket(handle)
            guard socket >= 0 else { return false }
            var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, 0)
            if ready == 0 { return true }
            if ready < 0 { return errno == EINTR }
            // Readable (or hung up) while idle. We never LISTEN, so this is the server
            // going away: read it so libpq notices, and retire the connection either way.
            _ = PQconsumeInput(handle)
            return false
        }
    }

    // MARK: - Statements

    /// Runs a statement and returns its rows (empty for statements without a result set).
    public func query(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await run(query).rows
    }

    /// Runs a statement and returns the number of rows it affected (`INSERT`, `UPDATE`,
    /// `DELETE`, …; 0 when the command reports none).
    @discardableResult
    public func execute(_ query: PostgresQuery) async throws -> Int {
        try await run(query).affectedRows
    }

    /// Runs SQL text through the simple query protocol, which allows several
    /// statements separated by semicolons (migrations). No parameters: only for SQL
    /// written in the source code.
    public func executeScript(_ sql: String) async throws {
        try await onQueue { handle in
            let result = PQexec(handle, sql)
            _ = try self.consume(result, handle: handle)
        }
    }

    /// Runs `body` inside `BEGIN` … `COMMIT`; rolls back and rethrows if it throws.
    @discardableResult
    public func withTransaction<Result: Sendable>(
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await execute("BEGIN")
        let result: Result
        do {
            result = try await body(self)
        } catch {
            // If even ROLLBACK fails, the connection is left in a transaction and
            // `isUsable` retires it.
            _ = try? await execute("ROLLBACK")
            throw error
        }
        try await execute("COMMIT")
        return result
    }

    private struct Outcome: Sendable {
        var rows: [PostgresRow]
        var affectedRows: Int
    }

    private func run(_ query: PostgresQuery) async throws -> Outcome {
        for bind in query.binds where bind.format == .text && bind.bytes?.contains(0) == true {
            throw PostgresError(code: .invalidParameter, message: "a text parameter contains a NUL character")
        }
        return try await onQueue { handle in
            let types = query.binds.map { $0.type.rawValue }
            let formats = query.binds.map { $0.format.rawValue }
            let lengths = query.binds.map { Int32($0.bytes?.count ?? 0) }
            // Each value in its own buffer, NUL-terminated (text format values are C strings).
            let buffers: [UnsafeMutablePointer<CChar>?] = query.binds.map { bind in
                guard let bytes = bind.bytes else { return nil }
                let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
                bytes.withUnsafeBytes { raw in
                    UnsafeMutableRawPointer(buffer).copyMemory(from: raw.baseAddress!, byteCount: bytes.count)
                }
                buffer[bytes.count] = 0
                return buffer
            }
            defer { buffers.forEach { $0?.deallocate() } }
            let values = buffers.map { UnsafePointer($0) }
            let count = Int32(query.binds.count)

            let result: OpaquePointer?
            if let name = query.preparedName {
                let statement = try self.prepare(name: name, sql: query.sql, types: types, handle: handle)
                result = PQexecPrepared(handle, statement, count, values, lengths, formats, 1)
            } else {
                result = PQexecParams(handle, query.sql, count, types, values, lengths, formats, 1)
            }
            return try self.consume(result, handle: handle)
        }
    }

    /// The server-side name of the prepared statement, preparing it on first use. Must run on `queue`.
    private func prepare(name: String, sql: String, types: [Oid], handle: OpaquePointer) throws -> String {
        let key = "\(name)\u{0}\(sql)\u{0}\(types)"
        if let existing = preparedStatements[key] { return existing }
        let serverName = "\(name)_\(preparedStatements.count + 1)"
        let result = PQprepare(handle, serverName, sql, Int32(types.count), types)
        _ = try consume(result, handle: handle)
        preparedStatements[key] = serverName
        return serverName
    }

    /// Turns a PGresult into rows or an error, and frees it (exactly once). Must run on `queue`.
    private func consume(_ result: OpaquePointer?, handle: OpaquePointer) throws -> Outcome {
        guard let result else {
            // libpq returns no result only when out of memory or the connection is gone.
            throw PostgresError(
                code: PQstatus(handle) == CONNECTION_BAD ? .connectionClosed : .unexpectedResult,
                message: Self.errorMessage(handle))
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        switch status {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return Outcome(rows: [], affectedRows: Self.affectedRows(result))
        case PGRES_TUPLES_OK, PGRES_SINGLE_TUPLE:
            return Outcome(rows: Self.rows(result), affectedRows: Self.affectedRows(result))
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR:
            let error = Self.error(result, handle: handle)
            if error.isReadOnlyTransaction { reachesStandby = true }
            throw error
        default:
            // COPY and pipeline states are never started by this client.
            let name = PQresStatus(status).map { String(cString: $0) } ?? "unknown"
            throw PostgresError(code: .unexpectedResult, message: "result status \(name)")
        }
    }

    private static func error(_ result: OpaquePointer, handle: OpaquePointer) -> PostgresError {
        func field(_ code: Character) -> String? {
            PQresultErrorField(result, Int32(code.asciiValue!)).map { String(cString: $0) }
        }
        let message =
            field("M")
            ?? (PQresultErrorMessage(result).map { String(cString: $0) } ?? "").trimmingCharacters(
                in: .whitespacesAndNewlines)
        if PQstatus(handle) == CONNECTION_BAD {
            // Includes the server's own FATAL (e.g. 57P01 on pg_terminate_backend).
            return PostgresError(code: .connectionClosed, message: message.isEmpty ? errorMessage(handle) : message)
        }
        guard let state = field("C") else {
            return PostgresError(code: .unexpectedResult, message: message)
        }
        return PostgresError(code: .server(sqlState: state), message: message, constraint: field("n"))
    }

    private static func rows(_ result: OpaquePointer) -> [PostgresRow] {
        let fieldCount = PQnfields(result)
        let rowCount = PQntuples(result)
        let columns = PostgresColumns(
            names: (0..<fieldCount).map { String(cString: PQfname(result, $0)) },
            types: (0..<fieldCount).map { PostgresDataType(rawValue: PQftype(result, $0)) })
        return (0..<rowCount).map { row in
            let values: [[UInt8]?] = (0..<fieldCount).map { field in
                if PQgetisnull(result, row, field) == 1 { return nil }
                let length = Int(PQgetlength(result, row, field))
                guard length > 0, let value = PQgetvalue(result, row, field) else { return [] }
                return Array(UnsafeRawBufferPointer(start: value, count: length))
            }
            return PostgresRow(columns: columns, values: values)
        }
    }

    private static func affectedRows(_ result: OpaquePointer) -> Int {
        guard let text = PQcmdTuples(result) else { return 0 }
        return Int(String(cString: text)) ?? 0
    }

    static func errorMessage(_ handle: OpaquePointer) -> String {
        guard let message = PQerrorMessage(handle) else { return "unknown error" }
        return String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// libpq's connection messages can quote pieces of the connection string; make
    /// sure the password is never among them. A string libpq cannot parse (its
    /// messages then quote the string itself, password and all) gets a message of ours.
    static func scrubPassword(_ message: String, connectionString: String) -> String {
        guard let options = PQconninfoParse(connectionString, nil) else {
            return "the connection string (DATABASE_URL) is not valid: not a libpq connection string or URL"
        }
        defer { PQconninfoFree(options) }
        var scrubbed = message
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "password", let value = option.pointee.val {
                let password = String(cString: value)
                if !password.isEmpty { scrubbed = scrubbed.replacingOccurrences(of: password, with: "***") }
            }
            option += 1
        }
        return scrubbed
    }

    /// Whether libpq can parse `connectionString` and its ports are port numbers
    /// (checked at startup, so a bad one is a configuration error naming the variable,
    /// never a message quoting it). libpq reads the ports only when it connects, and a
    /// failed connection looks like a server not up yet.
    /// So are the values of the options that take one of a few words or a whole number
    /// (libpq, too, checks those only when it connects, and refuses every connection).
    public static func isValidConnectionString(_ connectionString: String) -> Bool {
        guard let options = PQconninfoParse(connectionString, nil) else { return false }
        defer { PQconninfoFree(options) }
        var lists: [String: [Substring]] = [:]  // host, hostaddr, port: comma-separated
        var tlsRange = [0, 0]  // ssl_min_protocol_version, ssl_max_protocol_version (0: unset)
        var option = options
        while let keyword = option.pointee.keyword {
            let name = String(cString: keyword)
            if let value = option.pointee.val {
                if ["host", "hostaddr", "port"].contains(name) {
                    lists[name] = String(cString: value).split(separator: ",", omittingEmptySubsequences: false)
                } else if let words = enumeratedOptions[name], !words.contains(String(cString: value)) {
                    return false
                } else if integerOptions.contains(name), !isLibpqInteger(String(cString: value)) {
                    return false
                } else if let rank = tlsVersionRank[name] {
                    guard let version = tlsVersions.firstIndex(of: String(cString: value).lowercased()) else {
                        return false
                    }
                    tlsRange[rank] = version
                }
            }
            option += 1
        }
        // libpq refuses a minimum above the maximum.
        guard tlsRange[0] == 0 || tlsRange[1] == 0 || tlsRange[0] <= tlsRange[1] else { return false }
        guard let ports = lists["port"] else { return true }
        // One port per host, or one for all; an empty one means the default.
        let hosts = max(lists["host"]?.count ?? 1, lists["hostaddr"]?.count ?? 1)
        guard ports.count == 1 || ports.count == hosts else { return false }
        return ports.allSatisfy { port in
            let digits = port.trimmingCharacters(in: .whitespacesAndNewlines)
            return digits.isEmpty || Int(digits).map { (1...65535).contains($0) } == true
        }
    }

    /// libpq's options whose value is one of a few words (PostgreSQL 15's
    /// documentation), with those words.
    static let enumeratedOptions: [String: Set<String>] = [
        "sslmode": ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"],
        "gssencmode": ["disable", "prefer", "require"],
        "target_session_attrs": ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"],
        "channel_binding": ["disable", "prefer", "require"],
    ]

    /// `ssl_min_protocol_version` and `ssl_max_protocol_version` take one of these,
    /// in any case, in this order (empty: unset).
    static let tlsVersions = ["", "tlsv1", "tlsv1.1", "tlsv1.2", "tlsv1.3"]
    static let tlsVersionRank = ["ssl_min_protocol_version": 0, "ssl_max_protocol_version": 1]

    /// libpq's options whose value is a whole number (PostgreSQL 15's documentation).
    static let integerOptions: Set<String> = [
        "connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
        "tcp_user_timeout",
    ]

    /// What libpq's `parse_int_param` takes: a decimal `int`, signed, whitespace around it.
    static func isLibpqInteger(_ text: String) -> Bool {
        Int32(text.trimmingCharacters(in: .whitespaces)) != nil
    }

    /// Runs `work` with the open handle on this connection's queue.
    private func onQueue<T: Sendable>(_ work: @escaping @Sendable (OpaquePointer) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                guard let handle = self.handle else {
                    continuation.resume(
                        throwing: PostgresError(code: .connectionClosed, message: "connection was closed"))
                    return
                }
                continuation.resume(with: Result { try work(handle) })
            }
        }
    }
}
