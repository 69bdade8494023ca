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
            waitSeconds = try environment.integer("MIGRATE_WAIT_SECONDS", default: 60, range: 0...3600)
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
                // migrate would keep the services that wait for it from starting at all.
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

    /// A connection that could not be made, or a server still starting (57P03).
    static func isUnreachable(_ error: PostgresError) -> Bool {
        switch error.code {
        case .connectionFailed, .connectionClosed: true
        case .server(let sqlState): sqlState == "57P03"
        default: false
        }
    }
}
