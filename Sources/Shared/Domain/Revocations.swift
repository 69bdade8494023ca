/// The `revocations` table (`Migrations.revocations`): what Postgres records of
/// subscriptions deleted, apps switched off and plans changed, for the dispatch
/// workers' check of messages that waited (`RevocationLog`).
public enum Revocations {
    /// How long a revocation is kept: the workers hold it that long, and the ingress's
    /// sweep deletes older rows.
    public static let retentionSeconds = 1200

    /// Deletes the rows past `retentionSeconds`; how many.
    public static func prune(_ postgres: PostgresClient) async throws -> Int {
        try await postgres.execute(
            "DELETE FROM revocations WHERE at < now() - make_interval(secs => \(Double(retentionSeconds)))")
    }
}
