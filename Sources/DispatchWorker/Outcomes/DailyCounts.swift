import Foundation
import Shared
import Synchronization

/// Writes the Postgres side of the worker's outcomes in the background, once a second:
///
/// - **Daily counts** (account, app, UTC day: sent, failed, gone). The
///   acknowledgements add them up in Redis, in the script run that settles the
///   messages (`QueueScripts.acknowledge`), and `CountTransfer` moves them to
///   Postgres exactly once per stream. No count waits in this process's memory, so
///   a worker that dies, or stops while Postgres is away, loses none.
/// - **Last-push times** of subscriptions, added up in memory and written in batches:
///   at the interval, or sooner when a batch would write `batchSize` rows. A burst to
///   one device within the second is one update, not one per message. A time is kept
///   to the minute: a row is rewritten only when its time is a minute or more older,
///   since at many devices a new row version per sent push was most of Postgres's
///   work (and the App API's `lastPushAt` needs no finer). They are best effort: at
///   most `maximumKeptLastPush` wait at once, while a write fails or hangs (an outage
///   or a lock in Postgres must not grow the worker's memory with every device
///   pushed), and those unwritten when the worker stops are dropped; each device's
///   next push sets its own again.
final class DailyCounts: Sendable {
    /// A counter's kind; its raw value names it in Redis (`CounterField`).
    enum Kind: String, Sendable {
        case sent, failed, gone

        /// 0, 1, 2: where a kind's counter number is kept (`BatchCounters`).
        var index: Int {
            switch self {
            case .sent: 0
            case .failed: 1
            case .gone: 2
            }
        }
    }

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
        var lastPush: [SubscriptionKey: Date] = [:]
        var stopping = false
    }

    private let postgres: PostgresClient
    private let transfers: [CountTransfer]
    private let interval: Duration
    private let batchSize: Int
    private let maximumKeptLastPush: Int
    private let failureLog: ThrottledLog
    private let logger: Logger
    private let state = Mutex(State())
    private let loop = Mutex<Task<Void, Never>?>(nil)

    init(
        postgres: PostgresClient, transfers: [CountTransfer], interval: Duration = .seconds(1), batchSize: Int = 1000,
        maximumKeptLastPush: Int = 100_000, logger: Logger
    ) {
        self.postgres = postgres
        self.transfers = transfers
        self.interval = interval
        self.batchSize = batchSize
        self.maximumKeptLastPush = maximumKeptLastPush
        self.logger = logger
        failureLog = ThrottledLog(logger: logger, interval: .seconds(10))
    }

    func start() {
        loop.withLock { $0 = Task { await self.run() } }
    }

    /// Records the pushes of a batch of acknowledged outcomes (those sent) under one lock.
    func recordPushes(_ batch: [Acknowledgement.Item], at date: Date = Date()) {
        guard batch.contains(where: { $0.tally == .sent }) else { return }
        state.withLock { state in
            for item in batch where item.tally == .sent {
                let key = item.delivery.subscriptionKey
                // Full only while writes fail or hang: the loop writes at `batchSize`.
                guard state.lastPush.count < maximumKeptLastPush || state.lastPush[key] != nil else { continue }
                state.lastPush[key] = date
            }
        }
    }

    /// Moves and writes what is left, and ends the loop; waits for that at most
    /// `limit`, as a Postgres that does not answer (frozen, a lock) would hold a write
    /// for as long as it lasts. The counts not moved wait in Redis for another worker.
    func stop(waitingAtMost limit: Duration) async {
        state.withLock { $0.stopping = true }
        guard let loop = loop.withLock({ $0 }) else { return }
        do {
            try await loop.value(waitingAtMost: limit)
        } catch {
            logger.notice("stopping while a write to Postgres is unanswered; the daily counts wait in Redis")
        }
    }

    /// Moves the counts and writes the last-push times waiting now; false when either
    /// could not be (the counts stay in Redis, the times are kept up to the limit).
    @discardableResult
    func flush() async -> Bool {
        let moved = await moveCounts()
        return await writeLastPush(take()) && moved
    }

    /// How many last-push times wait to be written (tests).
    var pendingLastPushCount: Int {
        state.withLock { $0.lastPush.count }
    }

    /// The last-push time of `message`'s subscription waiting to be written (tests).
    func pendingLastPush(of message: QueueMessage) -> Date? {
        state.withLock { $0.lastPush[SubscriptionKey(message)] }
    }

    /// Checks every 50 ms whether an interval passed (then moves the counts and writes
    /// the last-push times) or the last-push times reached `batchSize` (then writes
    /// them, unless the last write failed: the next try waits for the interval).
    private func run() async {
        var last = ContinuousClock.now
        var failed = false
        while true {
            try? await Task.sleep(for: .milliseconds(50))
            let (stopping, rows) = state.withLock { ($0.stopping, $0.lastPush.count) }
            if stopping || ContinuousClock.now - last >= interval {
                last = .now
                let moved = await moveCounts()
                failed = !(await writeLastPush(take()))
                if stopping {
                    if !moved { logger.notice("stopping with daily counts not yet in Postgres; they wait in Redis") }
                    return
                }
            } else if rows >= batchSize && !failed {
                failed = !(await writeLastPush(take()))
            }
        }
    }

    /// Runs each stream's transfer; false when one failed.
    private func moveCounts() async -> Bool {
        var moved = true
        for transfer in transfers {
            do {
                _ = try await transfer.run()
            } catch {
                failureLog.warning("cannot move daily counts to Postgres; they wait in Redis", error: error)
                moved = false
            }
        }
        return moved
    }

    private func take() -> [SubscriptionKey: Date] {
        state.withLock { state in
            // Sized for the next batch: growing it again each second costs a rehash per doubling.
            defer { state.lastPush = Dictionary(minimumCapacity: state.lastPush.count) }
            return state.lastPush
        }
    }

    private func writeLastPush(_ lastPush: [SubscriptionKey: Date]) async -> Bool {
        guard !lastPush.isEmpty else { return true }
        let rows = lastPush.map { (key: $0.key.text, value: $0.value) }.sorted { $0.key < $1.key }
        do {
            try await postgres.execute(
                .prepared(
                    "worker_last_push",
                    """
                    UPDATE subscriptions s SET last_push_at = to_timestamp(u.at::float8)
                    FROM unnest(\(rows.map(\.key)), \(rows.map { Self.timestamp($0.value) })) AS u(id, at)
                    WHERE s.id = u.id AND (s.last_push_at IS NULL
                        OR s.last_push_at < to_timestamp(u.at::float8) - interval '1 minute')
                    """))
            return true
        } catch {
            failureLog.warning("cannot write last-push times; keeping some for the next try", error: error)
            state.withLock { state in
                for (id, date) in lastPush where (state.lastPush[id] ?? .distantPast) < date {
                    guard state.lastPush[id] != nil || state.lastPush.count < maximumKeptLastPush else { continue }
                    state.lastPush[id] = date
                }
            }
            return false
        }
    }

    /// Seconds since 1970 with milliseconds, for `to_timestamp`.
    static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        return "\(milliseconds / 1000).\(String(1000 + milliseconds % 1000).dropFirst())"
    }
}
