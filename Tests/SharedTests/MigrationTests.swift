import Foundation
import TestSupport
import Testing

@testable import Shared

@Suite struct MigrationTests {
    static let expectedTables: Set<String> = [
        "accounts", "activity_log", "app_api_keys", "app_authorizations", "app_identifiers", "app_unsubscribes",
        "app_user_disables", "apps", "daily_count_transfers", "daily_counts", "push_credentials", "schema_migrations",
        "revocations", "subscriptions", "users",
        "user_bans",
    ]

    static func tables(_ client: PostgresClient) async throws -> Set<String> {
        Set(
            try await client.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").map {
                try $0.decode("tablename", as: String.self)
            })
    }

    static func recorded(_ client: PostgresClient) async throws -> [String] {
        try await client.query("SELECT version, name FROM schema_migrations ORDER BY version").map {
            "\(try $0.decode("version", as: Int.self)) \(try $0.decode("name", as: String.self))"
        }
    }

    /// `recorded(_:)` once every migration of this build ran.
    static let everyMigration = Migrations.all.map { "\($0.version) \($0.name)" }

    @Test func migratingTwiceAppliesTheSchemaOnce() async throws {
        let database = try await ScratchDatabase.create("twice")
        let client = PostgresClient(url: database.url, applicationName: "pushgate-test-migrate")
        let (logger, lines) = TestEnvironment.capturingLogger()

        let first = try await Migrator(logger: logger).migrate(client)
        let second = try await Migrator(logger: logger).migrate(client)

        #expect(first.map(\.version) == Migrations.all.map(\.version))
        #expect(second.isEmpty)
        #expect(try await Self.recorded(client) == Self.everyMigration)
        #expect(try await Self.tables(client) == Self.expectedTables)
        #expect(lines.all.filter { $0.contains("\"message\":\"applied migration\"") }.count == Migrations.all.count)
        client.close()
        try await database.drop()
    }

    @Test func concurrentMigratorsInOneProcessApplyEachMigrationOnce() async throws {
        let database = try await ScratchDatabase.create("inprocess")
        let (logger, _) = TestEnvironment.capturingLogger()
        let clients = (0..<4).map { _ in PostgresClient(url: database.url, maximumConnections: 1) }
        let applied = try await withThrowingTaskGroup(of: Int.self) { group in
            for client in clients {
                group.addTask { try await Migrator(logger: logger).migrate(client).count }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(applied.sorted() == [0, 0, 0, Migrations.all.count])
        #expect(try await Self.recorded(clients[0]) == Self.everyMigration)
        clients.forEach { $0.close() }
        try await database.drop()
    }

    @Test func twoMigrateProcessesStartedTogetherApplyTheSchemaExactlyOnce() async throws {
        let database = try await ScratchDatabase.create("processes")
        async let a = Self.runMigrate(environment: ["DATABASE_URL": database.url])
        async let b = Self.runMigrate(environment: ["DATABASE_URL": database.url])
        let results = try await [a, b]

        #expect(results.map(\.status) == [0, 0])
        let output = results.map(\.standardError).joined()
        let appliedLines = output.split(separator: "\n").filter { $0.contains("\"message\":\"applied migration\"") }
        #expect(appliedLines.count == Migrations.all.count)
        #expect(output.split(separator: "\n").filter { $0.contains("\"message\":\"schema is up to date\"") }.count == 1)

        let client = PostgresClient(url: database.url)
        #expect(try await Self.recorded(client) == Self.everyMigration)
        #expect(try await Self.tables(client) == Self.expectedTables)
        client.close()
        try await database.drop()
    }

    /// A Postgres that does not answer yet (a host still booting) is waited for, up
    /// to `MIGRATE_WAIT_SECONDS`: a failed `migrate` at boot leaves a new schema
    /// unapplied until someone runs it again. Past the wait, it fails (exit 1).
    /// A refusal of an option's value that the startup check does not know (a newer
    /// libpq's) fails at once too, unlike a server not up yet.
    @Test func anOptionValueLibpqRefusesIsNotWaitedFor() {
        let server = "connection to server at \"127.0.0.1\", port 5432 failed: "
        #expect(
            !MigrationCommand.isUnreachable(
                PostgresError(code: .connectionFailed, message: "invalid require_auth value: \"x\"")))
        #expect(
            MigrationCommand.isUnreachable(
                PostgresError(code: .connectionFailed, message: server + "Connection refused")))
        #expect(
            !MigrationCommand.isUnreachable(
                PostgresError(
                    code: .connectionFailed, message: server + "FATAL:  password authentication failed for user")))
    }

    @Test func migrateWaitsForAPostgresThatDoesNotAnswerYet() async throws {
        let database = try await ScratchDatabase.create("late")
        let (relay, url) = try TCPRelay.inFront(of: database.url)
        defer { relay.close() }
        relay.cut()
        async let late = Self.runMigrate(environment: ["DATABASE_URL": url, "MIGRATE_WAIT_SECONDS": "30"])
        try await Task.sleep(for: .milliseconds(1500))
        relay.restore()
        let result = try await late
        #expect(result.status == 0)
        #expect(result.standardError.contains("Postgres does not answer yet; waiting for it"))
        #expect(result.standardError.contains("\"message\":\"migrations applied\""))

        // A failure waiting does not mend (here, no such database) fails at once.
        let missing = url.replacingOccurrences(of: database.name, with: database.name + "_missing")
        let wrong = try await Self.runMigrate(environment: ["DATABASE_URL": missing, "MIGRATE_WAIT_SECONDS": "30"])
        #expect(wrong.status == 1)
        #expect(!wrong.standardError.contains("waiting for it"))
        // An option value libpq would refuse only when connecting (an sslmode that is none
        // of its words, a timeout that is no number) is a configuration error before any.
        let separator = url.contains("?") ? "&" : "?"
        for option in ["sslmode=sometimes", "connect_timeout=soon"] {
            let bad = try await Self.runMigrate(environment: [
                "DATABASE_URL": url + separator + option, "MIGRATE_WAIT_SECONDS": "30",
            ])
            #expect(bad.status == 2)
            #expect(bad.standardError.contains("DATABASE_URL is not a libpq connection string"))
        }

        relay.cut()
        let begin = ContinuousClock.now
        let failed = try await Self.runMigrate(environment: ["DATABASE_URL": url, "MIGRATE_WAIT_SECONDS": "1"])
        #expect(failed.status == 1)
        #expect(ContinuousClock.now - begin >= .seconds(1))
        #expect(failed.standardError.contains("migration failed"))
        try await database.drop()
    }

    /// What waiting can mend, read from libpq's reason (after its last "failed:"), not
    /// from the host or database names quoted before it.
    @Test(arguments: [
        ("connection to server at \"db.invalid\" (10.0.0.1), port 5432 failed: Connection refused", true),
        ("connection to server at \"db\", port 5432 failed: received invalid response to SSL negotiation: H", true),
        ("could not translate host name \"db.invalid\" to address: Name or service not known", true),
        ("connection to server at \"db\", port 5432 failed: FATAL:  the database system is starting up", true),
        ("invalid sslmode value: \"sometimes\"", false),
        ("invalid integer value \"x\" for connection option \"connect_timeout\"", false),
        ("connection to server at \"db\", port 5432 failed: FATAL:  password authentication failed", false),
        ("connection to server at \"authentication\", port 5432 failed: timeout expired", true),
    ])
    func onlyFailuresWaitingCanMendAreWaitedFor(message: String, waited: Bool) {
        #expect(MigrationCommand.isUnreachable(PostgresError(code: .connectionFailed, message: message)) == waited)
    }

    @Test func migrateWithoutDatabaseURLExitsWithStatusTwoAndOneLine() async throws {
        let result = try await Self.runMigrate(environment: [:])
        #expect(result.status == 2)
        #expect(result.standardError == "configuration error: DATABASE_URL is required but not set\n")
    }

    @Test func aFailingMigrationRollsBackAndIsNotRecorded() async throws {
        let database = try await ScratchDatabase.create("failing")
        let client = PostgresClient(url: database.url)
        let (logger, _) = TestEnvironment.capturingLogger()
        let migrations = [
            Migration(version: 1, name: "first", sql: "CREATE TABLE first_table (id int);"),
            Migration(version: 2, name: "broken", sql: "CREATE TABLE second_table (id int); SELECT 1/0;"),
        ]
        let error = try await #require(throws: PostgresError.self) {
            try await Migrator(migrations: migrations, logger: logger).migrate(client)
        }
        #expect(error.sqlState == "22012")
        #expect(try await Self.recorded(client) == ["1 first"])
        #expect(try await Self.tables(client) == ["first_table", "schema_migrations"])
        // The lock was released: a fixed migration set applies afterwards.
        let fixed = [migrations[0], Migration(version: 2, name: "fixed", sql: "CREATE TABLE second_table (id int);")]
        #expect(try await Migrator(migrations: fixed, logger: logger).migrate(client).map(\.version) == [2])
        client.close()
        try await database.drop()
    }

    /// A schema change behind a long transaction's lock waits only `lockTimeout` (so the
    /// services' queries queued behind it are not held up), is tried again, and fails
    /// unrecorded once its attempts are spent; tried again after the lock is gone, it applies.
    @Test func aMigrationWaitsOnlyItsLockTimeoutAndTriesAgain() async throws {
        let database = try await ScratchDatabase.create("locktimeout")
        let client = PostgresClient(url: database.url)
        let (logger, lines) = TestEnvironment.capturingLogger()
        let first = Migration(version: 1, name: "first", sql: "CREATE TABLE busy (id int);")
        let second = Migration(version: 2, name: "alter", sql: "ALTER TABLE busy ADD COLUMN extra int;")
        try await Migrator(migrations: [first], logger: logger).migrate(client)

        let holder = try await PostgresConnection.connect(url: database.url)
        try await holder.execute("BEGIN")
        try await holder.execute("LOCK TABLE busy IN ACCESS SHARE MODE")  // a long reader
        let impatient = Migrator(
            migrations: [first, second], logger: logger, lockTimeout: .milliseconds(100), attempts: 2,
            retryPause: .milliseconds(10))
        let error = try await #require(throws: PostgresError.self) { try await impatient.migrate(client) }
        #expect(error.sqlState == "55P03")
        #expect(lines.all.filter { $0.contains("migration timed out waiting for a table lock") }.count == 1)
        #expect(try await Self.recorded(client) == ["1 first"])

        // The lock goes while the migration pauses between attempts.
        let patient = Migrator(
            migrations: [first, second], logger: logger, lockTimeout: .milliseconds(100), attempts: 3,
            retryPause: .milliseconds(400))
        async let applied = patient.migrate(client)
        try await Task.sleep(for: .milliseconds(200))
        try await holder.execute("COMMIT")
        #expect(try await applied.map(\.version) == [2])
        #expect(try await Self.recorded(client) == ["1 first", "2 alter"])
        holder.close()
        client.close()
        try await database.drop()
    }

    @Test func schemaEnforcesUniqueBundleIDsAndCascadingDeletes() async throws {
        let database = try await ScratchDatabase.create("constraints")
        let client = PostgresClient(url: database.url)
        let (logger, _) = TestEnvironment.capturingLogger()
        try await Migrator(logger: logger).migrate(client)

        let secretHash = [UInt8](repeating: 7, count: 32)
        try await client.execute("INSERT INTO accounts (id, plan) VALUES ('acct', 'plus')")
        try await client.execute(
            "INSERT INTO push_credentials (id, account_id, team_id, key_id, sealed_key) VALUES ('cred', 'acct', 'TEAM123456', 'KEY1234567', \([UInt8]([1, 2, 3])))"
        )
        try await client.execute(
            "INSERT INTO apps (id, account_id, push_enabled, credential_id) VALUES ('app1', 'acct', true, 'cred'), ('app2', 'acct', true, NULL)"
        )
        try await client.execute(
            "INSERT INTO app_identifiers (bundle_id, app_id) VALUES ('com.example.one', 'app1'), ('com.example.two', 'app1')"
        )
        try await client.execute("INSERT INTO users (id) VALUES ('123')")
        try await client.execute("INSERT INTO app_authorizations (user_id, app_id) VALUES ('123', 'app1')")
        for (id, topic) in [("s1", "com.example.one"), ("s2", "com.example.two"), ("s3", "com.example.two")] {
            try await client.execute(
                """
                INSERT INTO subscriptions (id, app_id, topic, device_token, sandbox, secret_hash, user_id)
                VALUES (\(id), 'app1', \(topic), 'abcdef0123', false, \(secretHash), '123')
                """)
        }

        // Bundle ids are unique site-wide, also ignoring case.
        let duplicate = try await #require(throws: PostgresError.self) {
            try await client.execute(
                "INSERT INTO app_identifiers (bundle_id, app_id) VALUES ('com.example.one', 'app2')")
        }
        #expect(duplicate.sqlState == "23505")
        #expect(duplicate.constraint == "app_identifiers_pkey")
        let caseVariant = try await #require(throws: PostgresError.self) {
            try await client.execute(
                "INSERT INTO app_identifiers (bundle_id, app_id) VALUES ('COM.Example.One', 'app2')")
        }
        #expect(caseVariant.constraint == "app_identifiers_bundle_id_lower")
        // Enums are CHECK constraints.
        let badPlan = try await #require(throws: PostgresError.self) {
            try await client.execute("INSERT INTO accounts (id, plan) VALUES ('x', 'gold')")
        }
        #expect(badPlan.sqlState == "23514")
        // A subscription's topic must be an identifier of its own app.
        let foreignTopic = try await #require(throws: PostgresError.self) {
            try await client.execute(
                "INSERT INTO subscriptions (id, app_id, topic, device_token, sandbox, secret_hash) VALUES ('s9', 'app2', 'com.example.one', 'ab', false, \(secretHash))"
            )
        }
        #expect(foreignTopic.sqlState == "23503")

        // Revoking the authorization keeps the binding (version 2); deleting the user
        // unbinds it; the subscription stays.
        let boundCount: PostgresQuery = "SELECT count(*) AS n FROM subscriptions WHERE user_id IS NOT NULL"
        let boundBefore = try await client.query(boundCount)[0].decode("n", as: Int.self)
        #expect(boundBefore > 0)
        try await client.execute("DELETE FROM app_authorizations WHERE user_id = '123' AND app_id = 'app1'")
        #expect(try await client.query(boundCount)[0].decode("n", as: Int.self) == boundBefore)
        try await client.execute("DELETE FROM users WHERE id = '123'")
        #expect(try await client.query(boundCount)[0].decode("n", as: Int.self) == 0)

        // Deleting an identifier deletes its subscriptions only.
        #expect(try await client.execute("DELETE FROM app_identifiers WHERE bundle_id = 'com.example.two'") == 1)
        let left = try await client.query("SELECT id FROM subscriptions ORDER BY id")
        #expect(try left.map { try $0.decode("id", as: String.self) } == ["s1"])

        // Deleting a credential leaves the app without one.
        try await client.execute("DELETE FROM push_credentials WHERE id = 'cred'")
        let app = try await client.query("SELECT credential_id, account_id FROM apps WHERE id = 'app1'")
        #expect(try app[0].decode("credential_id", as: String?.self) == nil)
        #expect(try app[0].decode("account_id", as: String.self) == "acct")

        // Deleting an app deletes its identifiers and subscriptions.
        try await client.execute("DELETE FROM apps WHERE id = 'app1'")
        let counts = try await client.query(
            "SELECT (SELECT count(*) FROM app_identifiers) AS identifiers, (SELECT count(*) FROM subscriptions) AS subscriptions"
        )
        #expect(try counts[0].decode("identifiers", as: Int.self) == 0)
        #expect(try counts[0].decode("subscriptions", as: Int.self) == 0)
        client.close()
        try await database.drop()
    }

    static func runMigrate(environment: [String: String]) async throws -> ChildProcess.Completion {
        try await BuiltExecutable.run("ingress-service", ["migrate"], environment: environment)
    }
}
