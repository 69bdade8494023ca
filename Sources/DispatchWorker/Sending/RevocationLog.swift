import Foundation
import Shared

/// The recent revocations (`Migrations.revocations`, written by triggers in the
/// changing transaction): subscriptions deleted, apps switched off, accounts whose
/// plan changed. Read from Postgres at most every `refreshInterval`, as a message that
/// waited is checked, and kept `retention`, so `RetriedSubscriptionCheck` looks such
/// a message up only when one concerns it: one small read per interval instead of a
/// query per batch while a backlog drains.
///
/// Each read takes the rows of the transactions at or past the oldest one still in
/// progress at the read before (its snapshot's `xmin`): one that was in progress then
/// commits later and is read next time, and a row already read is read again only
/// while an older transaction stays open. Past `capacity` revocations (a sweep
/// deleting very many subscriptions at once) the log holds none and every message
/// counts as concerned for `retention`; then it reads the last `retention` afresh.
/// After a read fails (or takes longer than `readLimit`: a frozen server, a lock),
/// `concerns` throws at once until `pause` sees Postgres answer again, rather than
/// make every batch wait on a dead database. What is held stays held meanwhile:
/// `deletedSubscriptions(among:)` still answers from it.
actor RevocationLog {
    let postgres: PostgresClient
    let pause: PostgresPause
    static let refreshInterval: Duration = .milliseconds(25)
    static let retention = TimeInterval(Revocations.retentionSeconds)
    static let pruneInterval: Duration = .seconds(60)
    /// The most revocations held (`init`), 200,000 by default: some 20 MB.
    let capacity: Int

    /// Each kind's revoked ids → the revocation's time (Postgres's clock). Apart, so a
    /// check looks ids up as they are, with no key built per message.
    private var subscriptions: [String: Date] = [:]
    private var apps: [String: Date] = [:]
    private var accounts: [String: Date] = [:]
    private var held: Int { subscriptions.count + apps.count + accounts.count }
    /// The `xmin` of the last read's snapshot: the next read starts there.
    private var horizon: Int64?
    private var refreshedAt: ContinuousClock.Instant?
    private var prunedAt: ContinuousClock.Instant?
    private var refreshing: Task<Void, any Error>?
    /// Until when every message counts as concerned, after `capacity` was passed.
    private var saturatedUntil: Date?

    /// How long a check waits for a read (`RetriedSubscriptionCheck.readLimit`).
    let readLimit: Duration

    init(
        postgres: PostgresClient, pause: PostgresPause? = nil, capacity: Int = 200_000,
        readLimit: Duration = RetriedSubscriptionCheck.readLimit
    ) {
        self.postgres = postgres
        self.pause = pause ?? PostgresPause(postgres: postgres)
        self.capacity = capacity
        self.readLimit = readLimit
    }

    /// Whether a revocation of the last `retention` may concern a message of each of
    /// `owners` (its subscription, app and account), read afresh if the last read is
    /// older than `refreshInterval`. Throws when Postgres cannot be read.
    func concerns(_ owners: [(subscription: String, app: String, account: String)]) async throws -> [Bool] {
        try await refreshIfStale()
        if saturatedUntil != nil { return owners.map { _ in true } }
        return owners.map {
            subscriptions[$0.subscription] != nil || apps[$0.app] != nil || accounts[$0.account] != nil
        }
    }

    /// One read at a time: callers arriving meanwhile wait for it, each at most
    /// `readLimit` (a read that takes longer counts as failed; it finishes in its own
    /// time, and no other starts before it has).
    private func refreshIfStale() async throws {
        let now = ContinuousClock.now
        if let refreshedAt, now - refreshedAt < Self.refreshInterval { return }
        if pause.isPaused { throw RevocationLogUnavailable() }
        let read: Task<Void, any Error>
        if let refreshing {
            read = refreshing
        } else {
            // Runs on this actor: cleared as it ends, whoever waits for it.
            read = Task {
                defer { refreshing = nil }
                try await refresh()
            }
            refreshing = read
        }
        do {
            try await read.value(waitingAtMost: readLimit)
        } catch {
            pause.failed()
            throw error
        }
    }

    private func refresh() async throws {
        let started = ContinuousClock.now
        if let until = saturatedUntil, Date() >= until {
            saturatedUntil = nil
            horizon = nil  // the last `retention` read afresh
        }
        // One statement, one snapshot: its xmin and the rows it sees (at least one row,
        // kind NULL, when there are none).
        let rows: [PostgresRow]
        if let horizon {
            rows = try await postgres.query(
                """
                WITH snapshot AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin)
                SELECT snapshot.xmin, r.kind, r.id, r.at
                FROM snapshot LEFT JOIN revocations r ON r.xid >= \(horizon)::text::xid8
                """)
        } else {
            rows = try await postgres.query(
                """
                WITH snapshot AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin)
                SELECT snapshot.xmin, r.kind, r.id, r.at
                FROM snapshot LEFT JOIN revocations r
                    ON r.at > now() - make_interval(secs => \(Double(Revocations.retentionSeconds)))
                """)
        }
        for row in rows where saturatedUntil == nil {
            guard let kind = try row.decode("kind", as: String?.self) else { continue }
            let (id, at) = (try row.decode("id", as: String.self), try row.decode("at", as: Date.self))
            switch kind {
            case "sub": subscriptions[id] = at
            case "app": apps[id] = at
            default: accounts[id] = at
            }
            if held > capacity {
                (subscriptions, apps, accounts) = ([:], [:], [:])
                saturatedUntil = Date().addingTimeInterval(Self.retention)
            }
        }
        if let xmin = try rows.first?.decode("xmin", as: Int64.self) { horizon = xmin }
        refreshedAt = started
        if prunedAt.map({ started - $0 >= Self.pruneInterval }) ?? true {
            prunedAt = started
            forgetExpired()
        }
    }

    /// Of `ids`, the subscriptions held as deleted, as last read (no read now): what
    /// can still be told while Postgres cannot be asked. (A deleted subscription stays
    /// deleted; an app switched off or a plan changed may have been undone since.)
    func deletedSubscriptions(among ids: [String]) -> Set<String> {
        Set(ids.filter { subscriptions[$0] != nil })
    }

    /// Forgets what passed `retention` (the table itself is pruned by the ingress's
    /// sweep), by this host's clock: one minutes apart from Postgres's would forget a
    /// revocation only once the messages it may concern have waited long enough to be
    /// looked up whatever it says.
    private func forgetExpired() {
        let cutoff = Date().addingTimeInterval(-Self.retention)
        subscriptions = subscriptions.filter { $0.value > cutoff }
        apps = apps.filter { $0.value > cutoff }
        accounts = accounts.filter { $0.value > cutoff }
    }
}

/// The revocation log paused after a failed read.
struct RevocationLogUnavailable: Error, CustomStringConvertible {
    var description: String { "the revocations could not be read lately; not tried again until Postgres answers" }
}
