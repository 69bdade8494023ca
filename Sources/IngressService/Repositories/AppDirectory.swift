import Shared

/// Apps, their identifiers and accounts, read from Postgres (registration and
/// cache fills only).
struct AppDirectory: Sendable {
    let postgres: PostgresClient

    /// The app a topic (bundle id, matched ignoring case) belongs to.
    struct TopicOwner: Sendable, Equatable {
        let appID: String
        /// The identifier as registered (the APNs topic).
        let bundleID: String
        let pushEnabled: Bool
        let plan: Plan
        /// Push enabled and offered by the plan.
        var acceptsPush: Bool { pushEnabled && plan.offersPush }
    }

    func owner(ofTopic topic: String) async throws -> TopicOwner? {
        let rows = try await postgres.query(
            .prepared(
                "ingress_topic_owner",
                """
                SELECT i.bundle_id, a.id, a.push_enabled, ac.plan
                FROM app_identifiers i JOIN apps a ON a.id = i.app_id JOIN accounts ac ON ac.id = a.account_id
                WHERE lower(i.bundle_id) = lower(\(topic))
                """))
        guard let row = rows.first else { return nil }
        return TopicOwner(
            appID: try row.decode("id"), bundleID: try row.decode("bundle_id"),
            pushEnabled: try row.decode("push_enabled"), plan: Plan(rawValue: try row.decode("plan")))
    }

    /// What the hot path needs of an app.
    struct AppEntry: Sendable, Equatable {
        let accountID: String
        let pushEnabled: Bool
        let credentialID: String?
        let credentialStatus: String?
    }

    func app(_ id: String) async throws -> AppEntry? {
        let rows = try await postgres.query(
            .prepared(
                "ingress_app_entry",
                """
                SELECT a.account_id, a.push_enabled, a.credential_id, c.status
                FROM apps a LEFT JOIN push_credentials c ON c.id = a.credential_id AND c.account_id = a.account_id
                WHERE a.id = \(id)
                """))
        guard let row = rows.first else { return nil }
        return AppEntry(
            accountID: try row.decode("account_id"), pushEnabled: try row.decode("push_enabled"),
            credentialID: try row.decode("credential_id"), credentialStatus: try row.decode("status"))
    }

    func plan(ofAccount id: String) async throws -> Plan? {
        let rows = try await postgres.query(
            .prepared("ingress_account_plan", "SELECT plan FROM accounts WHERE id = \(id)"))
        return try rows.first.map { Plan(rawValue: try $0.decode("plan")) }
    }
}
