import Shared

/// The App API's Postgres queries: binding, a user's devices, and what a send
/// must know per subscription (app, state, whether its user is to be skipped).
struct AppAPIRepository: Sendable {
    let postgres: PostgresClient

    struct Ownership: Sendable {
        let appID: String
        let secretHash: [UInt8]
    }

    func ownership(_ id: String) async throws -> Ownership? {
        let rows = try await postgres.query("SELECT app_id, secret_hash FROM subscriptions WHERE id = \(id)")
        guard let row = rows.first else { return nil }
        return Ownership(appID: try row.decode("app_id"), secretHash: try row.decode("secret_hash"))
    }

    func hasAuthorized(user: String, app: String) async throws -> Bool {
        try await postgres.query("SELECT 1 FROM app_authorizations WHERE user_id = \(user) AND app_id = \(app)")
            .count == 1
    }

    func bind(_ id: String, app: String, user: String) async throws -> Bool {
        try await postgres.execute("UPDATE subscriptions SET user_id = \(user) WHERE id = \(id) AND app_id = \(app)")
            == 1
    }

    func unbind(_ id: String, app: String) async throws -> Bool {
        try await postgres.execute("UPDATE subscriptions SET user_id = NULL WHERE id = \(id) AND app_id = \(app)") == 1
    }

    /// The user's active devices in `app`, as the JSON objects of the device list; none
    /// while the user has not authorized the app (bindings outlive a revocation).
    func devicesJSON(user: String, app: String) async throws -> [String] {
        let rows = try await postgres.query(
            """
            SELECT s.id, s.sandbox, s.p256dh, s.auth,
                to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS created,
                to_char(s.last_push_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS pushed
            FROM subscriptions s
            JOIN app_authorizations a ON a.user_id = s.user_id AND a.app_id = s.app_id
            WHERE s.app_id = \(app) AND s.user_id = \(user) AND s.state = 'active'
            ORDER BY s.created_at, s.id
            """)
        return try rows.map { row in
            let p256dh: [UInt8]? = try row.decode("p256dh")
            let auth: [UInt8]? = try row.decode("auth")
            let pushed: String? = try row.decode("pushed")
            let keys =
                if let p256dh, let auth {
                    "{\"p256dh\":\(JSONString.quote(Base64URL.encode(p256dh))),\"auth\":\(JSONString.quote(Base64URL.encode(auth)))}"
                } else { "null" }
            return "{\"id\":\(JSONString.quote(try row.decode("id") as String)),\"platform\":\"ios\","
                + "\"sandbox\":\(try row.decode("sandbox") as Bool),\"keys\":\(keys),"
                + "\"createdAt\":\(JSONString.quote(try row.decode("created") as String)),"
                + "\"lastPushAt\":\(pushed.map(JSONString.quote) ?? "null")}"
        }
    }

    /// What a send decides at the ingress, per subscription id that exists.
    struct SendTarget: Sendable {
        let appID: String
        let active: Bool
        /// Bound to a user who unsubscribed from this app, is banned, is disabled in this
        /// app, or no longer authorizes it.
        let skipped: Bool
    }

    /// What a send needs from Postgres, in one query: whether `app` pushes (its switch
    /// on, its owner's plan with push; false for an app that is gone) and the targets
    /// among `ids` that exist.
    func sendTargets(_ ids: [String], app: String) async throws -> (appPushes: Bool, targets: [String: SendTarget]) {
        let rows = try await postgres.query(
            """
            SELECT ap.push_enabled, c.plan, s.id, s.app_id, s.state = 'active' AS active,
                (s.user_id IS NOT NULL AND (
                    NOT EXISTS (SELECT 1 FROM app_authorizations a WHERE a.user_id = s.user_id AND a.app_id = s.app_id)
                    OR EXISTS (SELECT 1 FROM app_unsubscribes u WHERE u.user_id = s.user_id AND u.app_id = s.app_id)
                    OR EXISTS (SELECT 1 FROM user_bans b WHERE b.user_id = s.user_id)
                    OR EXISTS (SELECT 1 FROM app_user_disables d WHERE d.user_id = s.user_id AND d.app_id = s.app_id)
                )) AS skipped
            FROM apps ap JOIN accounts c ON c.id = ap.account_id
            LEFT JOIN subscriptions s ON s.id = ANY(\(ids))
            WHERE ap.id = \(app)
            """)
        guard let first = rows.first else { return (false, [:]) }
        let plan = Plan(rawValue: try first.decode("plan"))
        let appPushes = try first.decode("push_enabled", as: Bool.self) && plan.offersPush
        var targets: [String: SendTarget] = [:]
        for row in rows {
            guard let id: String = try row.decode("id") else { continue }  // no subscription matched
            targets[id] = SendTarget(
                appID: try row.decode("app_id"), active: try row.decode("active"), skipped: try row.decode("skipped"))
        }
        return (appPushes, targets)
    }
}
