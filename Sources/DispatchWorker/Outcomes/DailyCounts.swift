import Foundation
import Shared
import Synchronization

/// Daily send counts (account, app, UTC day: sent, failed, gone) and subscriptions'
/// last-push times, added up in memory and written in batches: once a second, or
/// sooner when a batch would write 1,000 rows (distinct subscriptions, or counters).
/// Outcomes that touch rows already in the batch add nothing to write: a burst to
/// one device within the second is one last-push update, not one per message. A
/// last-push time is kept to the minute: a row is rewritten only when its time is a
/// minute or more older, since at many devices a new row version per sent push was
/// most of Postgres's work (and the App API's `lastPushAt` needs no finer). Two
/// statements per batch, never one per message; rows are written in key order so
/// concurrent workers do not deadlock.
/// A batch that cannot be written parks its counts in Redis at once (`ParkedCounts`),
/// so a worker that dies while Postgres is away loses at most its last interval's
/// counts, not the outage's; they stay in memory only when Redis cannot take them
/// either (or there is no parking). Last-push times, one per device, stay in memory
/// for the next try, only up to `maximumKeptLastPush`, so an outage of Postgres does
/// not grow the worker's memory with every device pushed. The next try comes an
/// interval later (not at every check while Postgres is down). Counts still unwritten
/// when the worker stops are parked too. A worker takes parked counts over (and writes
/// them at once) as soon as Postgres answers again after it parked its own, and
/// otherwise every `adoptionInterval` after a write of its own reached Postgres: a
/// stopped worker's, or those of one that died.
final class DailyCounts: Sendable {
    struct Key: Hashable, Sendable {
        let account: String
        let app: String
        let day: String
    }

    struct Tally: Sendable, Equatable {
        var sent = 0
        var failed = 0
        var gone = 0

        mutating func add(_ other: Tally) {
            sent += other.sent
            failed += other.failed
            gone += other.gone
        }
    }

    enum Kind: Sendable { case sent, failed, gone }

    /// A subscription id as a dictionary key, made without a String and compared
    /// without reaching into another message: the service's ids (22 characters) are
    /// packed into three words, so counting a sent message's last push allocates
    /// nothing. A longer id (not one this service made) is kept as text.
    struct SubscriptionKey: Hashable, Sendable {
        private var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
        private let count: Int
        private var longID: String?

        init(_ message: QueueMessage) {
            let id = message.subscriptionIDBytes
            count = id.count
            if count <= MemoryLayout.size(ofValue: words) {
                id.withUnsafeBytes { id in
                    withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: id) }
                }
            } else {
                longID = String(decoding: id, as: UTF8.self)
            }
        }

        var text: String {
            longID ?? withUnsafeBytes(of: words) { String(decoding: $0.prefix(count), as: UTF8.self) }
        }

        static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.count == rhs.count && lhs.words.0 == rhs.words.0 && lhs.words.1 == rhs.words.1
                && lhs.words.2 == rhs.words.2 && lhs.longID == rhs.longID
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(words.0)
            hasher.combine(words.1)
            hasher.combine(words.2)
            hasher.combine(longID)
        }
    }

    private struct State {
        var tallies: [Key: Tally] = [:]
        var lastPush: [SubscriptionKey: Date] = [:]
        var stopping = false
        /// Counts of this worker's went to Redis after a failed write, and no parked
        /// counts were taken over since: Postgres is asked whether it answers again even
        /// without counts of its own, so they do not wait for the next send.
        var parkedSinceAdoption = false
        /// The last UTC day seen (days since 1970) and its `yyyy-mm-dd`, so most
        /// outcomes do not format a date.
        var cachedDay: (number: Int, text: String) = (-1, "")
    }

    private let postgres: PostgresClient
    private let interval: Duration
    private let batchSize: Int
    private let maximumKeptLastPush: Int
    private let failureLog: ThrottledLog
    private let logger: Logger
    private let parking: ParkedCounts?
    private let adoptionInterval: Duration
    private let state = Mutex(State())
    private let loop = Mutex<Task<Void, Never>?>(nil)

    init(
        postgres: PostgresClient, interval: Duration = .seconds(1), batchSize: Int = 1000,
        maximumKeptLastPush: Int = 100_000, parking: ParkedCounts? = nil, adoptionInterval: Duration = .seconds(10),
        logger: Logger
    ) {
        self.postgres = postgres
        self.interval = interval
        self.batchSize = batchSize
        self.maximumKeptLastPush = maximumKeptLastPush
        self.parking = parking
        self.adoptionInterval = adoptionInterval
        self.logger = logger
        failureLog = ThrottledLog(logger: logger, interval: .seconds(10))
    }

    func start() {
        loop.withLock { $0 = Task { await self.run() } }
    }

    /// Counts one outcome; `sent` also records the subscription's last push.
    func record(_ kind: Kind, message: QueueMessage, at date: Date = Date()) {
        let dayNumber = Int((date.timeIntervalSince1970 / 86_400).rounded(.down))
        state.withLock { state in
            if state.cachedDay.number != dayNumber { state.cachedDay = (dayNumber, Self.day(of: date)) }
            let key = Key(account: message.accountID, app: message.appID, day: state.cachedDay.text)
            switch kind {
            case .sent:
                state.tallies[key, default: Tally()].sent += 1
                state.lastPush[SubscriptionKey(message)] = date
            case .failed: state.tallies[key, default: Tally()].failed += 1
            case .gone: state.tallies[key, default: Tally()].gone += 1
            }
        }
    }

    /// Counts a batch of acknowledged outcomes under one lock; consecutive outcomes
    /// of one account and app (the usual case) share one tally update. Retries are
    /// not outcomes yet, and count nothing.
    func record(_ batch: [Acknowledgement.Item], at date: Date = Date()) {
        guard !batch.isEmpty else { return }
        let dayNumber = Int((date.timeIntervalSince1970 / 86_400).rounded(.down))
        state.withLock { state in
            if state.cachedDay.number != dayNumber { state.cachedDay = (dayNumber, Self.day(of: date)) }
            // The run's account and app are compared as bytes; their strings are made once per run.
            var runStart = 0
            var tally = Tally()
            func flushRun() {
                guard tally.sent + tally.failed + tally.gone > 0 else { return }
                let message = batch[runStart].delivery.message
                let key = Key(account: message.accountID, app: message.appID, day: state.cachedDay.text)
                state.tallies[key, default: Tally()].add(tally)
            }
            for (index, item) in batch.enumerated() {
                let delivery = item.delivery
                if index > runStart && !delivery.message.hasSameAccountAndApp(as: batch[runStart].delivery.message) {
                    flushRun()
                    (runStart, tally) = (index, Tally())
                }
                switch item.tally {
                case .sent:
                    tally.sent += 1
                    state.lastPush[delivery.subscriptionKey] = date
                case .failed: tally.failed += 1
                case .gone: tally.gone += 1
                case nil: break
                }
            }
            flushRun()
        }
    }

    /// Writes what is left and ends the loop.
    func stop() async {
        state.withLock { $0.stopping = true }
        await loop.withLock { $0 }?.value
    }

    /// Writes what has accumulated now; false when it could not (it is kept).
    @discardableResult
    func flush() async -> Bool {
        let (tallies, lastPush) = take()
        return await write(tallies, lastPush)
    }

    /// What waits to be written: the counters, and how many last-push times (tests).
    var pending: (tallies: [Key: Tally], lastPushCount: Int) {
        state.withLock { ($0.tallies, $0.lastPush.count) }
    }

    /// Checks every 50 ms whether a second passed or a batch's rows reached `batchSize`;
    /// after a failed write, waits the interval before the next try. Takes parked
    /// counts over once Postgres is known to answer: after a write that reached it
    /// (an empty batch says nothing of Postgres: taken over then, they would only wait
    /// in this worker's memory instead of Redis), or, while this worker's own counts
    /// are parked, after a probe; when stopping, parks what could not be written.
    private func run() async {
        var last = ContinuousClock.now
        var lastAdoption: ContinuousClock.Instant?
        var failed = false
        while true {
            try? await Task.sleep(for: .milliseconds(50))
            let (stopping, rows, owesParked) = state.withLock {
                ($0.stopping, max($0.tallies.count, $0.lastPush.count), $0.parkedSinceAdoption)
            }
            let due = ContinuousClock.now - last >= interval
            guard stopping || due || (rows >= batchSize && !failed) else { continue }
            last = .now
            failed = !(await flush())
            if stopping {
                if failed { await parkUnwritten() }
                return
            }
            guard !failed else { continue }
            let adoptionDue = owesParked || (lastAdoption.map { ContinuousClock.now - $0 >= adoptionInterval } ?? true)
            guard adoptionDue else { continue }
            if rows == 0 {
                guard owesParked, await postgresAnswers() else { continue }
            }
            lastAdoption = .now
            // Written at once, not with the next batch: taken out of Redis, they are
            // only in this worker's memory until then.
            if await adoptParked() { failed = !(await flush()) }
        }
    }

    /// Whether Postgres answers a trivial query.
    private func postgresAnswers() async -> Bool {
        (try? await postgres.execute("SELECT 1")) != nil
    }

    /// Adds the parked counts to this worker's own; whether there were any.
    private func adoptParked() async -> Bool {
        guard let parking else { return false }
        do {
            let parked = try await parking.takeAll()
            state.withLock { state in
                state.parkedSinceAdoption = false
                for (key, tally) in parked { state.tallies[key, default: Tally()].add(tally) }
            }
            guard !parked.isEmpty else { return false }
            logger.info("took over parked daily counts", metadata: ["rows": "\(parked.count)"])
            return true
        } catch {
            failureLog.warning("cannot read parked daily counts", error: error)
            return false
        }
    }

    /// Parks the counts the last write could not take, for another worker to write.
    private func parkUnwritten() async {
        let tallies = state.withLock { $0.tallies }
        guard let parking, !tallies.isEmpty else {
            if !tallies.isEmpty { logger.error("daily counts lost: Postgres could not take them") }
            return
        }
        do {
            try await parking.park(tallies)
            state.withLock { $0.tallies = [:] }
            logger.warning(
                "daily counts parked in Redis for another worker to write", metadata: ["rows": "\(tallies.count)"])
        } catch {
            logger.error(
                "daily counts lost: neither Postgres nor Redis could take them",
                metadata: ["rows": "\(tallies.count)", "error": ThrottledLog.describe(error)])
        }
    }

    private func take() -> ([Key: Tally], [SubscriptionKey: Date]) {
        state.withLock { state in
            defer {
                // Sized for the next batch: growing them again each second costs a rehash per doubling.
                state.tallies = Dictionary(minimumCapacity: state.tallies.count)
                state.lastPush = Dictionary(minimumCapacity: state.lastPush.count)
            }
            return (state.tallies, state.lastPush)
        }
    }

    private func write(_ tallies: [Key: Tally], _ lastPush: [SubscriptionKey: Date]) async -> Bool {
        guard !tallies.isEmpty || !lastPush.isEmpty else { return true }
        do {
            // One transaction: counts and last-push times become visible together.
            try await postgres.withTransaction { connection in
                if !tallies.isEmpty {
                    let rows = tallies.sorted {
                        ($0.key.account, $0.key.app, $0.key.day) < ($1.key.account, $1.key.app, $1.key.day)
                    }
                    try await connection.execute(
                        .prepared(
                            "worker_daily_counts",
                            """
                            INSERT INTO daily_counts (account_id, app_id, day, sent, failed, gone)
                            SELECT u.account_id, u.app_id, u.day::date, u.sent::bigint, u.failed::bigint, u.gone::bigint
                            FROM unnest(\(rows.map(\.key.account)), \(rows.map(\.key.app)), \(rows.map(\.key.day)),
                                \(rows.map { String($0.value.sent) }), \(rows.map { String($0.value.failed) }),
                                \(rows.map { String($0.value.gone) })) AS u(account_id, app_id, day, sent, failed, gone)
                            JOIN accounts a ON a.id = u.account_id
                            ON CONFLICT (account_id, app_id, day) DO UPDATE SET
                                sent = daily_counts.sent + EXCLUDED.sent,
                                failed = daily_counts.failed + EXCLUDED.failed,
                                gone = daily_counts.gone + EXCLUDED.gone
                            """))
                }
                if !lastPush.isEmpty {
                    let rows = lastPush.map { (key: $0.key.text, value: $0.value) }.sorted { $0.key < $1.key }
                    try await connection.execute(
                        .prepared(
                            "worker_last_push",
                            """
                            UPDATE subscriptions s SET last_push_at = to_timestamp(u.at::float8)
                            FROM unnest(\(rows.map(\.key)), \(rows.map { Self.timestamp($0.value) })) AS u(id, at)
                            WHERE s.id = u.id AND (s.last_push_at IS NULL
                                OR s.last_push_at < to_timestamp(u.at::float8) - interval '1 minute')
                            """))
                }
            }
        } catch {
            failureLog.warning(
                parking == nil
                    ? "cannot write daily counts; keeping them for the next batch"
                    : "cannot write daily counts; parking them in Redis", error: error)
            await keepUnwritten(tallies, lastPush)
            return false
        }
        return true
    }

    /// What a failed write could not take: the counts parked in Redis (kept in memory
    /// when they cannot be), the last-push times kept for the next try up to the limit.
    private func keepUnwritten(_ tallies: [Key: Tally], _ lastPush: [SubscriptionKey: Date]) async {
        var parked = false
        if let parking, !tallies.isEmpty {
            do {
                try await parking.park(tallies)
                parked = true
            } catch {
                failureLog.warning("cannot park daily counts in Redis either; keeping them", error: error)
            }
        }
        state.withLock { state in
            if parked {
                state.parkedSinceAdoption = true
            } else {
                for (key, tally) in tallies { state.tallies[key, default: Tally()].add(tally) }
            }
            for (id, date) in lastPush where (state.lastPush[id] ?? .distantPast) < date {
                guard state.lastPush[id] != nil || state.lastPush.count < maximumKeptLastPush else { continue }
                state.lastPush[id] = date
            }
        }
    }

    /// `yyyy-mm-dd` in UTC.
    static func day(of date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let month = Int(parts.tm_mon) + 1
        let day = Int(parts.tm_mday)
        return "\(Int(parts.tm_year) + 1900)-\(month < 10 ? "0" : "")\(month)-\(day < 10 ? "0" : "")\(day)"
    }

    /// Seconds since 1970 with milliseconds, for `to_timestamp`.
    static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        return "\(milliseconds / 1000).\(String(1000 + milliseconds % 1000).dropFirst())"
    }
}
