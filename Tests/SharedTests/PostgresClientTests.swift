import Foundation
import TestSupport
import Testing

@testable import Shared

@Suite struct PostgresClientTests {
    let client = PostgresClient(url: TestEnvironment.databaseURL, applicationName: "pushgate-test-client")

    /// A client's statement timeout is its connections' own: the server cancels a
    /// statement past it (SQLSTATE 57014), and the connection stays usable.
    @Test func aStatementPastTheClientsTimeoutIsCancelledByTheServer() async throws {
        let bounded = PostgresClient(
            configuration: .init(
                url: TestEnvironment.databaseURL, applicationName: "pushgate-test-bounded", maximumConnections: 1,
                statementTimeout: .milliseconds(200)))
        defer { bounded.close() }
        let started = ContinuousClock.now
        await #expect {
            try await bounded.query("SELECT pg_sleep(5)")
        } throws: { error in
            (error as? PostgresError)?.sqlState == "57014"
        }
        #expect(ContinuousClock.now - started < .seconds(4))
        #expect(try await bounded.query("SELECT 1 AS one").first?.decode("one", as: Int.self) == 1)
        // Sub-second limits kept as they are (not rounded down to whole seconds).
        #expect(
            try await bounded.query("SHOW statement_timeout").first?.decode("statement_timeout", as: String.self)
                == "200ms")
        #expect(
            try await client.query("SHOW statement_timeout").first?.decode("statement_timeout", as: String.self) == "0")
    }

    @Test func textAndUnicodeRoundTripThroughBoundParameters() async throws {
        let values = [
            "", "plain", "Grüße, 世界 👋🏽", "it's \"quoted\" \\ $1 ; DROP TABLE x; --",
            String(repeating: "x", count: 10_000),
        ]
        for value in values {
            let rows = try await client.query("SELECT \(value)::text AS value, octet_length(\(value)::text) AS length")
            #expect(rows.count == 1)
            #expect(try rows[0].decode("value", as: String.self) == value)
            #expect(try rows[0].decode("length", as: Int.self) == value.utf8.count)
        }
    }

    @Test func byteaRoundTripsEveryByteValue() async throws {
        let bytes = (0...255).map { UInt8($0) } + [0, 0, 255]
        let rows = try await client.query(
            "SELECT \(bytes) AS value, octet_length(\(bytes)) AS length, \([UInt8]()) AS empty")
        #expect(try rows[0].decode("value", as: [UInt8].self) == bytes)
        #expect(try rows[0].decode("length", as: Int32.self) == 259)
        #expect(try rows[0].decode("empty", as: [UInt8].self) == [])
    }

    @Test func integersAndBooleansRoundTripWithTheirTypes() async throws {
        let rows = try await client.query(
            """
            SELECT \(Int16.min) AS a, \(Int16.max) AS b, \(Int32.min) AS c, \(Int32.max) AS d,
                   \(Int64.min) AS e, \(Int64.max) AS f, \(-42) AS g, \(true) AS t, \(false) AS f2,
                   pg_typeof(\(Int16(1)))::text AS t16, pg_typeof(\(Int32(1)))::text AS t32,
                   pg_typeof(\(Int64(1)))::text AS t64, \(2.5) AS dbl
            """)
        let row = rows[0]
        #expect(try row.decode("a", as: Int16.self) == Int16.min)
        #expect(try row.decode("b", as: Int16.self) == Int16.max)
        #expect(try row.decode("c", as: Int32.self) == Int32.min)
        #expect(try row.decode("d", as: Int32.self) == Int32.max)
        #expect(try row.decode("e", as: Int64.self) == Int64.min)
        #expect(try row.decode("f", as: Int64.self) == Int64.max)
        #expect(try row.decode("g", as: Int.self) == -42)
        #expect(try row.decode("t", as: Bool.self) == true)
        #expect(try row.decode("f2", as: Bool.self) == false)
        #expect(try row.decode("t16", as: String.self) == "smallint")
        #expect(try row.decode("t32", as: String.self) == "integer")
        #expect(try row.decode("t64", as: String.self) == "bigint")
        #expect(try row.decode("dbl", as: Double.self) == 2.5)
        // Narrower columns widen; wider values that do not fit are a decoding error.
        #expect(try row.decode("a", as: Int64.self) == Int64(Int16.min))
        let error = try #require(throws: PostgresError.self) { try row.decode("f", as: Int32.self) }
        #expect(error.code == .decoding)
    }

    @Test func nullDecodesAsNilAndIsRejectedForNonOptionalTypes() async throws {
        let missing: String? = nil
        let missingBytes: [UInt8]? = nil
        let rows = try await client.query(
            "SELECT \(missing) AS s, \(missingBytes) AS b, NULL::int4 AS i, \(Optional("set")) AS present")
        let row = rows[0]
        #expect(try row.decode("s", as: String?.self) == nil)
        #expect(try row.decode("b", as: [UInt8]?.self) == nil)
        #expect(try row.decode("i", as: Int32?.self) == nil)
        #expect(try row.decode("present", as: String?.self) == "set")
        #expect(try row.isNull("s"))
        #expect(try !row.isNull("present"))
        let error = try #require(throws: PostgresError.self) { try row.decode("i", as: Int32.self) }
        #expect(error.code == .decoding)
    }

    @Test func timestampsRoundTripWithMicrosecondPrecision() async throws {
        // 2024-02-29 12:34:56.789012 UTC
        let date = Date(timeIntervalSince1970: 1_709_210_096.789012)
        let rows = try await client.query(
            """
            SELECT \(date) AS value, to_char(\(date) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS text,
                   '1999-12-31 23:59:59.5+00'::timestamptz AS before_epoch,
                   '2000-01-01'::date AS day, 'infinity'::timestamptz AS forever
            """)
        let row = rows[0]
        let decoded = try row.decode("value", as: Date.self)
        #expect(abs(decoded.timeIntervalSince1970 - 1_709_210_096.789012) < 0.000_001)
        #expect(try row.decode("text", as: String.self) == "2024-02-29 12:34:56.789012")
        #expect(try row.decode("before_epoch", as: Date.self) == Date(timeIntervalSince1970: 946_684_799.5))
        #expect(try row.decode("day", as: Date.self) == Date(timeIntervalSince1970: 946_684_800))
        #expect(try row.decode("forever", as: Date.self) == .distantFuture)
    }

    @Test func textArraysUUIDsAndJSONBDecode() async throws {
        let scopes = ["push:send", "a \"b\", {c}", "", "ünïcode ✓"]
        let id = UUID()
        let rows = try await client.query(
            "SELECT \(scopes) AS scopes, \([String]()) AS none, \(id) AS id, '{\"a\": 1}'::jsonb AS doc")
        #expect(try rows[0].decode("scopes", as: [String].self) == scopes)
        #expect(try rows[0].decode("none", as: [String].self) == [])
        #expect(try rows[0].decode("id", as: UUID.self) == id)
        #expect(try rows[0].decode("doc", as: String.self) == "{\"a\": 1}")
    }

    @Test func serverErrorCarriesSQLStateAndMessageButNoParameterValues() async throws {
        let secret = "s3cret-value-not-for-logs"
        let error = try await #require(throws: PostgresError.self) {
            try await client.query("SELECT \(secret)::int")
        }
        #expect(error.code == .server(sqlState: "22P02"))
        #expect(error.sqlState == "22P02")
        #expect(error.message == "invalid input syntax for type integer: \"\(secret)\"")
        #expect(!error.description.contains(secret))

        let missing = try await #require(throws: PostgresError.self) {
            try await client.query("SELECT * FROM \(identifier: "table_that_does_not_exist_x")")
        }
        #expect(missing.sqlState == "42P01")
        #expect(
            missing.description
                == "postgres: server error 42P01: relation \"table_that_does_not_exist_x\" does not exist")
    }

    @Test func interpolatedValuesAreBoundNotSpliced() async throws {
        let hostile = "'; SELECT 1; --"
        let query: PostgresQuery = "SELECT \(hostile) AS a, \(7) AS b"
        #expect(query.sql == "SELECT $1 AS a, $2 AS b")
        #expect(query.binds.count == 2)
        let rows = try await client.query(query)
        #expect(try rows[0].decode("a", as: String.self) == hostile)
        #expect(try rows[0].decode(1, as: Int.self) == 7)
        let error = try #require(throws: PostgresError.self) { try rows[0].decode("nope", as: Int.self) }
        #expect(error.code == .noSuchColumn)
    }

    @Test func executeReportsAffectedRowsAndTransactionsCommitOrRollBack() async throws {
        let table = "pg_client_tx_\(UInt32.random(in: 0...UInt32.max))"
        try await client.execute("CREATE TABLE \(identifier: table) (id int PRIMARY KEY, note text)")

        let inserted = try await client.execute(
            "INSERT INTO \(identifier: table) (id, note) VALUES (1, \("one")), (2, \("two")), (3, NULL)")
        #expect(inserted == 3)

        try await client.withTransaction { tx in
            try await tx.execute("UPDATE \(identifier: table) SET note = \("uno") WHERE id = \(Int32(1))")
        }
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await client.withTransaction { tx in
                try await tx.execute("DELETE FROM \(identifier: table)")
                throw Abort()
            }
        }
        let duplicate = try await #require(throws: PostgresError.self) {
            try await client.withTransaction { tx in
                try await tx.execute("INSERT INTO \(identifier: table) (id) VALUES (\(2))")
            }
        }
        #expect(duplicate.isUniqueViolation)
        #expect(duplicate.constraint == "\(table)_pkey")

        let rows = try await client.query("SELECT id, note FROM \(identifier: table) ORDER BY id")
        #expect(try rows.map { try $0.decode("id", as: Int.self) } == [1, 2, 3])
        #expect(try rows.map { try $0.decode("note", as: String?.self) } == ["uno", "two", nil])
        try await client.execute("DROP TABLE \(identifier: table)")
    }

    @Test func preparedStatementsArePreparedOncePerConnectionAndReused() async throws {
        let single = PostgresClient(
            url: TestEnvironment.databaseURL, applicationName: "pushgate-test-prepared", maximumConnections: 1)
        defer { single.close() }
        for value in 1...5 {
            let rows = try await single.query(.prepared("add_one", "SELECT \(value) + 1 AS next"))
            #expect(try rows[0].decode("next", as: Int.self) == value + 1)
        }
        // A NULL of the same Swift type reuses the same statement.
        let missing: Int? = nil
        let nullRows = try await single.query(.prepared("add_one", "SELECT \(missing) + 1 AS next"))
        #expect(try nullRows[0].decode("next", as: Int?.self) == nil)
        let statements = try await single.query(
            "SELECT name, parameter_types::text[] AS types FROM pg_prepared_statements ORDER BY name")
        #expect(try statements.map { try $0.decode("name", as: String.self) } == ["add_one_1"])
        #expect(try statements[0].decode("types", as: [String].self) == ["bigint"])
    }

    @Test func connectionFailureIsTypedAndHidesThePassword() async throws {
        let url = "postgresql://nobody:hunter2-secret@127.0.0.1:1/none?connect_timeout=2"
        let error = try await #require(throws: PostgresError.self) {
            _ = try await PostgresConnection.connect(url: url)
        }
        #expect(error.code == .connectionFailed)
        #expect(!error.description.contains("hunter2"))
        #expect(error.description.hasPrefix("postgres: connection failed: "))
    }

    @Test func closeIsIdempotentAndLaterUseFailsWithConnectionClosed() async throws {
        let connection = try await PostgresConnection.connect(url: TestEnvironment.databaseURL)
        #expect(connection.isUsable)
        connection.close()
        connection.close()
        #expect(!connection.isUsable)
        let error = try await #require(throws: PostgresError.self) { try await connection.query("SELECT 1") }
        #expect(error.code == .connectionClosed)
    }
}
