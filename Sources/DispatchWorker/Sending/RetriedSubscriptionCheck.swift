import Foundation
import Shared

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
/// Every such change is recorded in Postgres by the changing transaction itself
/// (`RevocationLog`): a first attempt that waited less than `loggedAge` is looked up
/// only when a recent revocation names its subscription, app or account, so a backlog
/// drains without a query per batch. Retries, and first attempts older than that, are
/// always looked up. At most one read of the revocations per 25 ms and one
/// query per batch of such messages; the others are sent without waiting for them
/// (`EntryProcessor`). When the revocations cannot be read, every waited message goes
/// to the query; when Postgres cannot answer that either (or not within `readLimit`),
/// the messages go out as before (except those of subscriptions the log already holds
/// as deleted), and both skip Postgres until it answers again (`PostgresPause`),
/// rather than make every later batch wait on a dead database: the check only narrows
/// a window.
final class RetriedSubscriptionCheck: Sendable {
    let postgres: PostgresClient
    let revocations: RevocationLog
    /// `WorkerMetrics.waitedChecks`.
    private let checks: Counter
    private let failures: ThrottledLog
    /// Shared with `revocations`: one failed read pauses both.
    let pause: PostgresPause
    /// How long a batch waits for a read of the revocations or a lookup before its
    /// messages go out unchecked (and the checks pause): a frozen server or a lock
    /// must not hold the messages, and the in-flight permits they hold, with it. The
    /// checks' connections also have the server cancel statements past it.
    static let readLimit: Duration = .seconds(2)
    /// Age (since acceptance, in milliseconds) from which a message is checked even on
    /// its first attempt: past any lag of a worker keeping up, so only a backlog pays
    /// for the check, and short enough that a worker's restart is covered.
    static let checkedAge: Int64 = 2_000
    /// Age up to which a first attempt trusts the revocation log, which holds
    /// revocations for `RevocationLog.retention` (twice as long): minutes to spare for
    /// clock skew between the hosts.
    static let loggedAge: Int64 = 600_000

    /// `postgres`: the checks' own client (`WorkerApplication`: its statements cancelled
    /// past `readLimit`, its connections apart from the outcomes' and credentials'), so
    /// reads stuck on a lock or a frozen server hold none of theirs.
    init(postgres: PostgresClient, checks: Counter, logger: Logger) {
        self.postgres = postgres
        pause = PostgresPause(postgres: postgres)
        revocations = RevocationLog(postgres: postgres, pause: pause)
        self.checks = checks
        failures = ThrottledLog(logger: logger, interval: .seconds(60))
    }

    /// Whether `message` is checked before it goes out: a retry, or one that waited.
    static func needsCheck(_ message: QueueMessage, nowMilliseconds: Int64) -> Bool {
        message.attempts > 0 || nowMilliseconds - message.acceptedAt > checkedAge
    }

    /// `deliveries` (each `needsCheck`) split into those to send and those not to,
    /// with the outcome of each of those.
    func partition(
        _ deliveries: [Delivery], nowMilliseconds: Int64 = Int64(Date().timeIntervalSince1970 * 1000)
    ) async -> (send: [Delivery], dropped: [(Delivery, DeliveryOutcome)]) {
        let queried = await needingQuery(deliveries, nowMilliseconds: nowMilliseconds)
        checks.increment(by: Double(deliveries.count - queried.count), "log")
        checks.increment(by: Double(queried.count), "lookup")
        guard !queried.isEmpty else { return (deliveries, []) }
        let dropped = await lookUp(queried.map { deliveries[$0] })
        guard !dropped.isEmpty else { return (deliveries, []) }
        let droppedIDs = Set(dropped.map { ObjectIdentifier($0.0) })
        return (deliveries.filter { !droppedIDs.contains(ObjectIdentifier($0)) }, dropped)
    }

    /// The indices of the deliveries to look up in Postgres: retries, first attempts
    /// older than `loggedAge`, and those a recent revocation may concern.
    private func needingQuery(_ deliveries: [Delivery], nowMilliseconds: Int64) async -> [Int] {
        var queried: [Int] = []
        var logged: [Int] = []
        for (index, delivery) in deliveries.enumerated() {
            let message = delivery.message
            if message.attempts > 0 || nowMilliseconds - message.acceptedAt >= Self.loggedAge {
                queried.append(index)
            } else {
                logged.append(index)
            }
        }
        guard !logged.isEmpty else { return queried }
        let concerned: [Bool]
        do {
            concerned = try await revocations.concerns(
                logged.map {
                    let message = deliveries[$0].message
                    return (message.subscriptionID, message.appID, message.accountID)
                })
        } catch {
            failures.warning("cannot read the recent revocations; looking every waiting message up", error: error)
            return (queried + logged).sorted()
        }
        for (position, index) in logged.enumerated() where concerned[position] { queried.append(index) }
        return queried.sorted()
    }

    /// Which of `deliveries` are not to be sent, looked up in Postgres: those whose
    /// subscription is gone or whose app no longer pushes. When Postgres cannot answer,
    /// only those whose subscription the revocation log holds as deleted.
    private func lookUp(_ deliveries: [Delivery]) async -> [(Delivery, DeliveryOutcome)] {
        let ids = Array(Set(deliveries.map(\.message.subscriptionID)))
        if pause.isPaused { return await knownDeleted(deliveries, ids: ids) }
        // Each subscription that still exists: whether its app still pushes.
        var pushes: [String: Bool] = [:]
        do {
            let rows = try await withTimeLimit(Self.readLimit) { [postgres] in
                try await postgres.query(
                    """
                    SELECT s.id, a.push_enabled, c.plan
                    FROM subscriptions s JOIN apps a ON a.id = s.app_id JOIN accounts c ON c.id = a.account_id
                    WHERE s.id = ANY(\(ids))
                    """)
            }
            for row in rows {
                let plan = Plan(rawValue: try row.decode("plan"))
                pushes[try row.decode("id", as: String.self)] =
                    try row.decode("push_enabled", as: Bool.self) && plan.offersPush
            }
        } catch {
            pause.failed()
            failures.warning("cannot check waiting messages' subscriptions; sending them", error: error)
            return await knownDeleted(deliveries, ids: ids)
        }
        return deliveries.compactMap { delivery in
            switch pushes[delivery.message.subscriptionID] {
            case nil: (delivery, .subscriptionDeleted)
            case false?: (delivery, .pushDisabled)
            case true?: nil
            }
        }
    }

    /// Of `deliveries`, those whose subscription the revocation log held as deleted at
    /// its last read.
    private func knownDeleted(_ deliveries: [Delivery], ids: [String]) async -> [(Delivery, DeliveryOutcome)] {
        let deleted = await revocations.deletedSubscriptions(among: ids)
        guard !deleted.isEmpty else { return [] }
        return deliveries.filter { deleted.contains($0.message.subscriptionID) }.map { ($0, .subscriptionDeleted) }
    }
}
