import Foundation
import Shared
import Synchronization

/// Before a message that waited goes out (a retry, or a first attempt read, claimed
/// or postponed seconds after its acceptance), whether its subscription still exists
/// and its app still pushes.
///
/// A worker keeping up sends a first attempt within milliseconds of its acceptance,
/// but a retry (APNs failing meanwhile) comes minutes later, and a first attempt
/// waits while the workers are behind (restarting, down, a backlog): meanwhile the
/// device's DELETE, the removal of its bundle id, or the deletion of its app or
/// account may have hard-deleted the subscription (sending it then would reach a
/// device the service no longer knows), or its app's push may have been switched off
/// or its owner's plan lost push.
///
/// One query per batch of such messages; the others are sent without waiting for it
/// (`EntryProcessor`). When Postgres cannot answer, the messages go out as before,
/// and the check pauses a while rather than make every later batch wait on a dead
/// database: it only narrows a window.
final class RetriedSubscriptionCheck: Sendable {
    let postgres: PostgresClient
    private let failures: ThrottledLog
    /// Until when the check is skipped after a failed query.
    private let pausedUntil = Mutex<ContinuousClock.Instant?>(nil)
    static let pauseAfterFailure: Duration = .seconds(30)
    /// Age (since acceptance, in milliseconds) from which a message is checked even on
    /// its first attempt: past any lag of a worker keeping up, so only a backlog pays
    /// for the query, and short enough that a worker's restart is covered.
    static let checkedAge: Int64 = 2_000

    init(postgres: PostgresClient, logger: Logger) {
        self.postgres = postgres
        failures = ThrottledLog(logger: logger, interval: .seconds(60))
    }

    /// Whether `message` is checked before it goes out: a retry, or one that waited.
    static func needsCheck(_ message: QueueMessage, nowMilliseconds: Int64) -> Bool {
        message.attempts > 0 || nowMilliseconds - message.acceptedAt > checkedAge
    }

    /// `deliveries` (each `needsCheck`) split into those to send and those not to,
    /// with the outcome of each of those.
    func partition(_ deliveries: [Delivery]) async -> (send: [Delivery], dropped: [(Delivery, DeliveryOutcome)]) {
        if let until = pausedUntil.withLock({ $0 }), ContinuousClock.now < until { return (deliveries, []) }
        let ids = Array(Set(deliveries.map(\.message.subscriptionID)))
        // Each subscription that still exists: whether its app still pushes.
        var pushes: [String: Bool] = [:]
        do {
            let rows = try await postgres.query(
                """
                SELECT s.id, a.push_enabled, c.plan
                FROM subscriptions s JOIN apps a ON a.id = s.app_id JOIN accounts c ON c.id = a.account_id
                WHERE s.id = ANY(\(ids))
                """)
            for row in rows {
                let plan = Plan(rawValue: try row.decode("plan"))
                pushes[try row.decode("id", as: String.self)] =
                    try row.decode("push_enabled", as: Bool.self) && plan.offersPush
            }
        } catch {
            pausedUntil.withLock { $0 = .now + Self.pauseAfterFailure }
            failures.warning("cannot check waiting messages' subscriptions; sending them", error: error)
            return (deliveries, [])
        }
        var send: [Delivery] = []
        var dropped: [(Delivery, DeliveryOutcome)] = []
        for delivery in deliveries {
            switch pushes[delivery.message.subscriptionID] {
            case nil: dropped.append((delivery, .subscriptionDeleted))
            case false?: dropped.append((delivery, .pushDisabled))
            case true?: send.append(delivery)
            }
        }
        return (send, dropped)
    }
}
