/// One versioned schema change. `sql` may hold several statements; it runs in one
/// transaction together with its row in `schema_migrations`, so it must be
/// transaction-safe (no `CREATE INDEX CONCURRENTLY`, no `VACUUM`).
public struct Migration: Sendable, Equatable {
    public let version: Int
    public let name: String
    public let sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// Applies pending migrations in version order.
///
/// Replicas that start together may all run it: the work happens under a
/// session-level advisory lock (`pg_advisory_lock(Migrator.advisoryLockKey)`) held on
/// one connection, so the second replica waits, then finds nothing pending. Each
/// migration and its `schema_migrations` row commit in one transaction, so a failed
/// migration leaves no trace and is retried on the next run.
///
/// A migration waits at most `lockTimeout` for each table lock (`lock_timeout`): a
/// schema change queued behind a long transaction would otherwise hold up every
/// query of the live services that touches the table. One that times out is rolled
/// back and tried again after a pause, `attempts` times in all, then the run fails.
public struct Migrator: Sendable {
    /// The advisory lock key: "pushgate" in ASCII.
    public static let advisoryLockKey: Int64 = 0x7075_7368_6761_7465

    public let migrations: [Migration]
    public let logger: Logger
    public let lockTimeout: Duration
    public let attempts: Int
    /// The pause before the next attempt after the n-th lock timeout: n times this.
    public let retryPause: Duration

    public init(
        migrations: [Migration] = Migrations.all, logger: Logger, lockTimeout: Duration = .seconds(5),
        attempts: Int = 5, retryPause: Duration = .seconds(2)
    ) {
        precondition(
            Set(migrations.map(\.version)).count == migrations.count, "migration versions must be unique")
        precondition(attempts > 0 && lockTimeout > .zero, "a migration needs an attempt and a lock timeout")
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.logger = logger
        self.lockTimeout = lockTimeout
        self.attempts = attempts
        self.retryPause = retryPause
    }

    /// Applies what is pending and returns the migrations applied by this call.
    @discardableResult
    public func migrate(_ client: PostgresClient) async throws -> [Migration] {
        try await client.withConnection { try await migrate(on: $0) }
    }

    /// Same as `migrate(_:)` on a connection the caller holds.
    @discardableResult
    public func migrate(on connection: PostgresConnection) async throws -> [Migration] {
        try await connection.execute("SELECT pg_advisory_lock(\(Self.advisoryLockKey))")
        do {
            let applied = try await applyPending(on: connection)
            try await connection.execute("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))")
            return applied
        } catch {
            // Closing the session would release the lock too; unlock so a pooled connection is clean.
            _ = try? await connection.execute("SELECT pg_advisory_unlock(\(Self.advisoryLockKey))")
            throw error
        }
    }

    private func applyPending(on connection: PostgresConnection) async throws -> [Migration] {
        try await connection.execute(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY,
                name text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        let done = Set(
            try await connection.query("SELECT version FROM schema_migrations").map {
                try $0.decode("version", as: Int.self)
            })
        if let newest = done.max(), let known = migrations.last?.version, newest > known {
            logger.warning(
                "database schema is newer than this build",
                metadata: ["migration.database": "\(newest)", "migration.known": "\(known)"])
        }
        var applied: [Migration] = []
        for migration in migrations where !done.contains(migration.version) {
            let start = ContinuousClock.now
            try await apply(migration, on: connection)
            logger.notice(
                "applied migration",
                metadata: [
                    "migration.version": "\(migration.version)", "migration.name": migration.name,
                    "migration.duration": "\(ContinuousClock.now - start)",
                ])
            applied.append(migration)
        }
        return applied
    }

    /// One migration in its transaction, tried again while it times out on a lock.
    private func apply(_ migration: Migration, on connection: PostgresConnection) async throws {
        let timeoutMilliseconds = max(1, Int64((lockTimeout / .milliseconds(1)).rounded(.up)))
        for attempt in 1...attempts {
            do {
                try await connection.withTransaction { tx in
                    try await tx.executeScript("SET LOCAL lock_timeout = '\(timeoutMilliseconds)ms'")
                    try await tx.executeScript(migration.sql)
                    try await tx.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (\(Int32(migration.version)), \(migration.name))"
                    )
                }
                return
            } catch let error as PostgresError where error.isLockNotAvailable && attempt < attempts {
                logger.warning(
                    "migration timed out waiting for a table lock; trying again",
                    metadata: [
                        "migration.version": "\(migration.version)", "migration.attempt": "\(attempt)",
                        "migration.lock_timeout": "\(lockTimeout)",
                    ])
                try await Task.sleep(for: retryPause * attempt)
            }
        }
    }
}
