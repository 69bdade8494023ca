import Foundation
import Shared

/// Hard-deletes a subscription whose device token APNs declared dead (410
/// Unregistered, 400 BadDeviceToken), after dropping its Redis copies and leaving the
/// tombstone that makes its push URL answer 410.
///
/// Nothing is deleted when the subscription changed after Apple's verdict: its
/// token or environment is no longer the one sent to (a PUT replaced the token, or
/// corrected `sandbox`, the usual cause of BadDeviceToken), or the device refreshed
/// it (`last_seen_at`, set by every PUT) after Apple's 410 `timestamp`.
///
/// The row is locked, the tombstone written, then the row deleted, in one
/// transaction: a failure at any step leaves the row for the retry, and a row found
/// already gone was removed by someone else (the device's DELETE, the sweep, an
/// admin change), whose push URL must answer 404, not the tombstone's 410. (Deleting
/// first and tombstoning after could not tell a retry whose tombstone failed from those.)
/// Redis does not roll back with Postgres: a tombstone whose deletion failed is
/// withdrawn at once, and again by a retry that finds the row kept, so a live device's
/// push URL does not answer 410 for the tombstone's lifetime.
struct SubscriptionRemover: Sendable {
    enum Result: Sendable, Equatable {
        /// Deleted now (with its tombstone), or already deleted by someone else.
        case removed
        /// Updated after Apple's verdict: kept.
        case kept
    }

    let postgres: PostgresClient

    func remove(_ message: QueueMessage, unregisteredAt timestamp: Date?, invalidation: CacheInvalidation) async throws
        -> Result
    {
        try await postgres.withTransaction { connection in
            let rows = try await connection.query(
                """
                SELECT (lower(device_token) = lower(\(message.deviceToken)) AND sandbox = \(message.sandbox)
                        AND (\(timestamp)::timestamptz IS NULL OR last_seen_at <= \(timestamp)::timestamptz)
                    ) AS verdict_holds
                FROM subscriptions WHERE id = \(message.subscriptionID) FOR UPDATE
                """)
            guard let row = rows.first else { return .removed }
            let (id, app) = (message.subscriptionID, message.appID)
            guard try row.decode("verdict_holds", as: Bool.self) else {
                try await invalidation.tombstoneWithdrawn(id, app: app)  // an earlier try's, if its deletion failed
                return .kept
            }
            do {
                try await invalidation.subscriptionGone(id, app: app)
                try await connection.execute("DELETE FROM subscriptions WHERE id = \(id)")
            } catch {
                // Rolled back: the row stays, so its push URL must not answer 410. If
                // Redis cannot be told now, the retry's verdict check tells it.
                try? await invalidation.tombstoneWithdrawn(id, app: app)
                throw error
            }
            return .removed
        }
    }
}
