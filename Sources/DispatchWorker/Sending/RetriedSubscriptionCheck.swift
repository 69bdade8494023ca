import Shared

/// Before a retried message goes out again, whether its subscription still exists and
/// its app still pushes.
///
/// A first attempt follows its acceptance within milliseconds, but a retry (APNs
/// failing meanwhile) comes minutes later, after the device's DELETE, the removal of
/// its bundle id, or the deletion of its app or account may have hard-deleted the
/// subscription (sending it then would reach a device the service no longer knows),
/// or after its app's push was switched off or its owner's plan lost push.
/// One query per batch of retried messages; first attempts cost nothing. When
/// Postgres cannot answer, the messages go out as before (the check only narrows a
/// window, it never holds a send back).
struct RetriedSubscriptionCheck: Sendable {
    let postgres: PostgresClient
    let failures: ThrottledLog

    init(postgres: PostgresClient, logger: Logger) {
        self.postgres = postgres
        failures = ThrottledLog(logger: logger, interval: .seconds(60))
    }

    /// `deliveries` split into those to send and the retried ones not to send, with
    /// the outcome of each of those.
    func partition(_ deliveries: [Delivery]) async -> (send: [Delivery], dropped: [(Delivery, DeliveryOutcome)]) {
        let retried = Set(deliveries.lazy.filter { $0.message.attempts > 0 }.map(\.message.subscriptionID))
        guard !retried.isEmpty else { return (deliveries, []) }
        // Each retried subscription that still exists: whether its app still pushes.
        var pushes: [String: Bool] = [:]
        do {
            let ids = Array(retried)
            let rows = try await postgres.query(
                """
                SELECT s.id, a.push_enabled AND c.plan <> 'lite' AS pushes
                FROM subscriptions s JOIN apps a ON a.id = s.app_id JOIN accounts c ON c.id = a.account_id
                WHERE s.id = ANY(\(ids))
                """)
            for row in rows { pushes[try row.decode("id", as: String.self)] = try row.decode("pushes", as: Bool.self) }
        } catch {
            failures.warning("cannot check retried messages' subscriptions; sending them", error: error)
            return (deliveries, [])
        }
        var send: [Delivery] = []
        var dropped: [(Delivery, DeliveryOutcome)] = []
        for delivery in deliveries {
            guard delivery.message.attempts > 0 else {
                send.append(delivery)
                continue
            }
            switch pushes[delivery.message.subscriptionID] {
            case nil: dropped.append((delivery, .subscriptionDeleted))
            case false?: dropped.append((delivery, .pushDisabled))
            case true?: send.append(delivery)
            }
        }
        return (send, dropped)
    }
}
