import Foundation
import Shared

/// Subscriptions in Postgres. No notification content is ever written here.
struct SubscriptionRepository: Sendable {
    let postgres: PostgresClient

    struct NewSubscription: Sendable {
        let id: String
        let appID: String
        let topic: String
        let deviceToken: String
        let sandbox: Bool
        let alertTitle: String
        let alertBody: String
        let p256dh: [UInt8]?
        let auth: [UInt8]?
        let secretHash: [UInt8]
    }

    func insert(_ subscription: NewSubscription) async throws {
        try await postgres.execute(
            """
            INSERT INTO subscriptions
                (id, app_id, topic, device_token, sandbox, alert_title, alert_body, p256dh, auth, secret_hash)
            VALUES (\(subscription.id), \(subscription.appID), \(subscription.topic), \(subscription.deviceToken),
                \(subscription.sandbox), \(subscription.alertTitle), \(subscription.alertBody), \(subscription.p256dh),
                \(subscription.auth), \(subscription.secretHash))
            """)
    }

    /// What authenticating a device call needs.
    struct Credentials: Sendable {
        let secretHash: [UInt8]
        let topic: String
    }

    func credentials(_ id: String) async throws -> Credentials? {
        let rows = try await postgres.query(
            .prepared("ingress_subscription_secret", "SELECT secret_hash, topic FROM subscriptions WHERE id = \(id)"))
        guard let row = rows.first else { return nil }
        return Credentials(secretHash: try row.decode("secret_hash"), topic: try row.decode("topic"))
    }

    /// What the hot path needs of a subscription (the cache entry).
    struct CacheEntry: Sendable, Equatable {
        let appID: String
        let topic: String
        let deviceToken: String
        let sandbox: Bool
        let active: Bool
        let alertTitle: String
        let alertBody: String
    }

    func cacheEntry(_ id: String) async throws -> CacheEntry? {
        let rows = try await postgres.query(
            .prepared(
                "ingress_subscription_entry",
                """
                SELECT app_id, topic, device_token, sandbox, state, alert_title, alert_body
                FROM subscriptions WHERE id = \(id)
                """))
        guard let row = rows.first else { return nil }
        return CacheEntry(
            appID: try row.decode("app_id"), topic: try row.decode("topic"),
            deviceToken: try row.decode("device_token"), sandbox: try row.decode("sandbox"),
            active: try row.decode("state", as: String.self) == "active", alertTitle: try row.decode("alert_title"),
            alertBody: try row.decode("alert_body"))
    }

    /// Changes the given fields (nil: unchanged) and refreshes `last_seen_at`.
    func update(
        _ id: String, deviceToken: String?, sandbox: Bool?, alertTitle: String?, alertBody: String?,
        p256dh: [UInt8]?, auth: [UInt8]?
    ) async throws -> Bool {
        try await postgres.execute(
            """
            UPDATE subscriptions SET
                device_token = COALESCE(\(deviceToken), device_token), sandbox = COALESCE(\(sandbox), sandbox),
                alert_title = COALESCE(\(alertTitle), alert_title), alert_body = COALESCE(\(alertBody), alert_body),
                p256dh = COALESCE(\(p256dh), p256dh), auth = COALESCE(\(auth), auth), last_seen_at = now()
            WHERE id = \(id)
            """) == 1
    }

    func activate(_ id: String) async throws -> Bool {
        try await postgres.execute("UPDATE subscriptions SET state = 'active' WHERE id = \(id)") == 1
    }

    func delete(_ id: String) async throws -> Bool {
        try await postgres.execute("DELETE FROM subscriptions WHERE id = \(id)") == 1
    }

    /// Hard-deletes up to `limit` subscriptions not refreshed for `maximumAgeSeconds`; their ids.
    func deleteStale(maximumAgeSeconds: Int, limit: Int) async throws -> [String] {
        // The age is checked again on the row the DELETE locks: a PUT that refreshed
        // it while the DELETE waited for its lock keeps it (the subquery's snapshot
        // would still call it stale, and Postgres re-checks only the outer condition).
        let rows = try await postgres.query(
            """
            DELETE FROM subscriptions WHERE id IN (
                SELECT id FROM subscriptions
                WHERE last_seen_at < now() - make_interval(secs => \(Double(maximumAgeSeconds)))
                LIMIT \(limit))
            AND last_seen_at < now() - make_interval(secs => \(Double(maximumAgeSeconds)))
            RETURNING id
            """)
        return try rows.map { try $0.decode("id") }
    }
}
