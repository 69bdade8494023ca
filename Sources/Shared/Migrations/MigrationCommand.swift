import Foundation

/// `ingress-service migrate` / `dispatch-worker migrate`: applies pending migrations
/// and exits. Needs only `DATABASE_URL`; waits up to `MIGRATE_WAIT_SECONDS` (60) for
/// a Postgres that does not answer yet.
public enum MigrationCommand {
    /// The command's name on the executables' command lines.
    public static let name = "migrate"

    /// Runs the migrations; returns the exit status: 0 done, 1 failed, 2 configuration error.
    public static func run(environment: Environment = Environment(), logger: Logger) async -> Int32 {
        let url: String
        let waitSeconds: Int
        do {
            url = try CommonConfiguration.databaseURL(environment)
            waitSeconds = try CommonConfiguration.migrateWaitSeconds(environment)
        } catch {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            return 2
        }
        let logger = logger.child("migrate")
        let client = PostgresClient(
            configuration: .init(url: url, applicationName: "pushgate-migrate", maximumConnections: 1))
        defer { client.close() }
        let deadline = ContinuousClock.now + .seconds(waitSeconds)
        var waitingLogged = false
        while true {
            do {
                let applied = try await Migrator(logger: logger).migrate(client)
                logger.notice(
                    applied.isEmpty ? "schema is up to date" : "migrations applied",
                    metadata: ["migration.applied": applied.map { "\($0.version)" }.joined(separator: ",")])
                return 0
            } catch let error as PostgresError where Self.isUnreachable(error) && ContinuousClock.now < deadline {
                // Postgres not up yet (a host booting, a pod scheduled first): a failed
                // migrate would leave a new schema unapplied until run again by hand.
                if !waitingLogged {
                    logger.warning(
                        "Postgres does not answer yet; waiting for it",
                        metadata: ["error": "\(error)", "wait.seconds": "\(waitSeconds)"])
                    waitingLogged = true
                }
                try? await Task.sleep(for: .seconds(1))
            } catch {
                logger.error("migration failed", metadata: ["error": "\(error)"])
                return 1
            }
        }
    }

    /// A connection that could not be made, or broke, for a reason that can pass
    /// (refused, timed out, no route, the server starting or stopping); not one that
    /// waiting does not mend (a wrong password, a missing database or role, a
    /// `pg_hba.conf` refusal, a certificate), which fails at once.
    static func isUnreachable(_ error: PostgresError) -> Bool {
        switch error.code {
        case .connectionFailed, .connectionClosed:
            // libpq names the server (a host, a database) before "failed:"; only what
            // follows its last one is the reason.
            let text = error.description.lowercased()
            let reason = text.range(of: "failed:", options: .backwards).map { text[$0.upperBound...] } ?? text[...]
            return !lastingFailures.contains { reason.contains($0) } && !reason.contains(Self.refusedOptionValue)
        default:
            return false
        }
    }

    /// libpq's words for connection failures that waiting does not mend.
    static let lastingFailures = [
        "password", "authentication", "does not exist", "pg_hba.conf", "certificate", "permission denied",
        "invalid port number", "could not match",
    ]

    /// An option value libpq refuses only when connecting: `invalid sslmode value`,
    /// `invalid integer value "x" for connection option "port"` (not, say, a proxy's
    /// `invalid response to SSL negotiation`, which can pass).
    nonisolated(unsafe) static let refusedOptionValue = /invalid [a-z_]+ value/
}
