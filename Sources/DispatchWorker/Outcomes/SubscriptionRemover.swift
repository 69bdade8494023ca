import Foundation
import Shared

/// Hard-deletes a subscription whose device token APNs declared dead (410
/// Unregistered, 400 BadDeviceToken), then drops its Redis copies and leaves the
/// tombstone that makes its push URL answer 410.
///
/// Nothing is deleted when the subscription changed after Apple's verdict: its
/// token or environment is no longer the one sent to (a PUT replaced the token, or
/// corrected `sandbox`, the usual cause of BadDeviceToken), or the device refreshed
/// it (`last_seen_at`, set by every PUT) after Apple's 410 `timestamp`.
struct SubscriptionRemover: Sendable {
    enum Result: Sendable, Equatable {
        /// Deleted now, or already gone.
        case removed
        /// Updated after Apple's verdict: kept.
        case kept
    }

    let postgres: PostgresClient

    func remove(_ message: QueueMessage, unregisteredAt timestamp: Date?, invalidation: CacheInvalidation) async throws
        -> Result
    {
        let rows = try await postgres.query(
            .prepared(
                "worker_remove_gone_subscription",
                """
                WITH removed AS (
                    DELETE FROM subscriptions
                    WHERE id = \(message.subscriptionID) AND lower(device_token) = lower(\(message.deviceToken))
                        AND sandbox = \(message.sandbox)
                        AND (\(timestamp)::timestamptz IS NULL OR last_seen_at <= \(timestamp)::timestamptz)
                    RETURNING 1)
                SELECT (SELECT count(*) FROM removed) AS removed,
                    EXISTS (SELECT 1 FROM subscriptions WHERE id = \(message.subscriptionID)) AS present
                """))
        let removed = try rows.first?.decode("removed", as: Int64.self) ?? 0
        let present = try rows.first?.decode("present", as: Bool.self) ?? false
        // The EXISTS sees the snapshot before the DELETE: present and not removed = kept.
        guard removed > 0 || !present else { return .kept }
        try await invalidation.subscriptionGone(message.subscriptionID, app: message.appID)
        return .removed
    }
}
