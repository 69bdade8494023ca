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
public struct Migrator: Sendable {
    /// The advisory lock key: "pushgate" in ASCII.
    public static let advisoryLockKey: Int64 = 0x7075_7368_6761_7465

    public let migrations: [Migration]
    public let logger: Logger

    public init(migrations: [Migration] = Migrations.all, logger: Logger) {
        precondition(
            Set(migrations.map(\.version)).count == migrations.count, "migration versions must be unique")
        self.migrations = migrations.sorted { $0.version < $1.version }
        self.logger = logger
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
            try await connection.withTransaction { tx in
                try await tx.executeScript(migration.sql)
                try await tx.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES (\(Int32(migration.version)), \(migration.name))"
                )
            }
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
}
