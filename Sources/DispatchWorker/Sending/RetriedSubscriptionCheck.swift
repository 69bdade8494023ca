import Shared

/// Before a retried message goes out again, whether its subscription still exists.
///
/// A first attempt follows its acceptance within milliseconds, but a retry (APNs
/// failing meanwhile) comes minutes later, after the device's DELETE, the removal of
/// its bundle id, or the deletion of its app or account may have hard-deleted the
/// subscription: sending it then would reach a device the service no longer knows.
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

    /// `deliveries` split into those to send and the retried ones whose subscription
    /// is gone.
    func partition(_ deliveries: [Delivery]) async -> (send: [Delivery], deleted: [Delivery]) {
        let retried = Set(deliveries.lazy.filter { $0.message.attempts > 0 }.map(\.message.subscriptionID))
        guard !retried.isEmpty else { return (deliveries, []) }
        let existing: Set<String>
        do {
            let ids = Array(retried)
            let rows = try await postgres.query("SELECT id FROM subscriptions WHERE id = ANY(\(ids))")
            existing = Set(try rows.map { try $0.decode("id", as: String.self) })
        } catch {
            failures.warning("cannot check retried messages' subscriptions; sending them", error: error)
            return (deliveries, [])
        }
        var send: [Delivery] = []
        var deleted: [Delivery] = []
        for delivery in deliveries {
            if delivery.message.attempts > 0 && !existing.contains(delivery.message.subscriptionID) {
                deleted.append(delivery)
            } else {
                send.append(delivery)
            }
        }
        return (send, deleted)
    }
}
