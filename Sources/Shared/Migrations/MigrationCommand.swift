import Foundation

/// `ingress-service migrate` / `dispatch-worker migrate`: applies pending migrations
/// and exits. Needs only `DATABASE_URL`.
public enum MigrationCommand {
    /// The command's name on the executables' command lines.
    public static let name = "migrate"

    /// Runs the migrations; returns the exit status: 0 done, 1 failed, 2 configuration error.
    public static func run(environment: Environment = Environment(), logger: Logger) async -> Int32 {
        let url: String
        do {
            url = try CommonConfiguration.databaseURL(environment)
        } catch {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            return 2
        }
        let logger = logger.child("migrate")
        let client = PostgresClient(
            configuration: .init(url: url, applicationName: "pushgate-migrate", maximumConnections: 1))
        defer { client.close() }
        do {
            let applied = try await Migrator(logger: logger).migrate(client)
            logger.notice(
                applied.isEmpty ? "schema is up to date" : "migrations applied",
                metadata: ["migration.applied": applied.map { "\($0.version)" }.joined(separator: ",")])
            return 0
        } catch {
            logger.error("migration failed", metadata: ["error": "\(error)"])
            return 1
        }
    }
}
