import Shared

/// Moves one stream's daily counts from Redis, where the acknowledgements add them
/// up in the same script run that settles the messages (`QueueScripts.acknowledge`),
/// into Postgres, each count exactly once, whoever dies when:
///
/// 1. `take` renames the counts hash (`RedisKeys.pendingCounts`) to the moving hash
///    (`movingCounts`) and stamps it with a new transfer id, this worker as its owner
///    and the time. Acknowledgements meanwhile start a new counts hash. A moving hash
///    already there (a transfer that did not finish) is taken again instead, by its
///    owner, or by any worker once the owner has not touched it for `lease`.
/// 2. One Postgres statement records the transfer id in `daily_count_transfers` and,
///    only when the id was new, adds the counts to `daily_counts`: a transfer applied
///    before (its answer lost, or its owner dead before step 3, or two workers racing
///    past the lease) adds nothing a second time.
/// 3. `finish` deletes the moving hash, if it is still this transfer's.
///
/// While Postgres is away the moving hash waits in Redis, and the counts after it in
/// the counts hash; neither grows past one field per counter, and no worker holds
/// counts in memory. An id is kept a day: a transfer is retried only while its
/// moving hash is in Redis, which outlives its application by a day only when Redis
/// itself is away that long (or a worker stalls that long mid-transfer).
struct CountTransfer: Sendable {
    /// A row of `daily_counts`.
    struct Key: Hashable, Sendable {
        let account: String
        let app: String
        let day: String
    }

    /// What a transfer adds to a row.
    struct Tally: Sendable, Equatable {
        var sent = 0
        var failed = 0
        var gone = 0

        mutating func add(_ kind: DailyCounts.Kind, _ amount: Int) {
            switch kind {
            case .sent: sent += amount
            case .failed: failed += amount
            case .gone: gone += amount
            }
        }
    }

    let redis: RedisClient
    let postgres: PostgresClient
    let keys: RedisKeys
    /// This worker's name (`WORKER_ID`): a transfer's owner.
    let owner: String
    let lease: Duration

    /// KEYS: 1 counts hash, 2 moving hash, 3 the hash older releases parked counts in
    /// (`RedisKeys.legacyParkedCounts`: same fields), added to the counts hash first.
    /// ARGV: 1 owner, 2 a new transfer id, 3 lease in ms. Returns the moving hash's
    /// fields and values, or nil when there is nothing to move or another worker's
    /// transfer is under way.
    static let takeScript = RedisScript(
        source: """
            if redis.call('EXISTS', KEYS[3]) == 1 then
              local parked = redis.call('HGETALL', KEYS[3])
              for i = 1, #parked, 2 do redis.call('HINCRBY', KEYS[1], parked[i], parked[i + 1]) end
              redis.call('DEL', KEYS[3])
            end
            local t = redis.call('TIME')
            local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            if redis.call('EXISTS', KEYS[2]) == 1 then
              local held = redis.call('HMGET', KEYS[2], '#owner', '#at')
              if held[1] ~= ARGV[1] and now - tonumber(held[2] or 0) < tonumber(ARGV[3]) then return false end
            elseif redis.call('EXISTS', KEYS[1]) == 1 then
              redis.call('RENAME', KEYS[1], KEYS[2])
            else
              return false
            end
            redis.call('HSETNX', KEYS[2], '#id', ARGV[2])
            redis.call('HSET', KEYS[2], '#owner', ARGV[1], '#at', now)
            return redis.call('HGETALL', KEYS[2])
            """)

    /// KEYS: 1 moving hash. ARGV: 1 transfer id. Deletes the hash if it is that transfer's.
    static let finishScript = RedisScript(
        source: """
            if redis.call('HGET', KEYS[1], '#id') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
            return 0
            """)

    private static let idField = Array("#id".utf8)

    /// Moves what waits; returns how many rows (account, app, day) it moved (0:
    /// nothing waited, or another worker is moving it). Throws when Redis or Postgres failed: the counts
    /// stay in Redis for the next try.
    func run() async throws -> Int {
        let reply = try await redis.run(
            Self.takeScript, keys: [keys.pendingCounts, keys.movingCounts, keys.legacyParkedCounts],
            arguments: [owner, Base64URL.encode(SecureRandom.bytes(16)), lease.inWholeMilliseconds]
        ).throwingError()
        guard let items = reply.array else { return 0 }
        var transferID: String?
        var tallies: [Key: Tally] = [:]
        for pair in stride(from: 0, to: items.count - 1, by: 2) {
            guard let field = items[pair].bytes else { continue }
            if field == Self.idField { transferID = items[pair + 1].string }
            guard let (key, kind) = CounterField.counter(field),
                let amount = items[pair + 1].string.flatMap({ Int($0) })
            else { continue }
            tallies[key, default: .init()].add(kind, amount)
        }
        guard let transferID else {
            throw RedisError(code: .unexpectedReply, message: "the count transfer script answered no transfer id")
        }
        if !tallies.isEmpty { try await apply(tallies, transferID: transferID) }
        _ = try await redis.run(Self.finishScript, keys: [keys.movingCounts], arguments: [transferID])
            .throwingError()
        return tallies.count
    }

    /// Adds `tallies` to `daily_counts` unless transfer `transferID` was applied
    /// already, in one statement (so atomically); rows in key order, so transfers of
    /// different streams seldom deadlock (one that does is simply tried again: it is
    /// applied once either way). Ids older than a day are dropped.
    private func apply(_ tallies: [Key: Tally], transferID: String) async throws {
        let rows = tallies.sorted {
            ($0.key.account, $0.key.app, $0.key.day) < ($1.key.account, $1.key.app, $1.key.day)
        }
        try await postgres.execute(
            .prepared(
                "worker_count_transfer",
                """
                WITH transfer AS (
                    INSERT INTO daily_count_transfers (id) VALUES (\(transferID))
                    ON CONFLICT (id) DO NOTHING RETURNING id
                ), expired AS (
                    DELETE FROM daily_count_transfers WHERE applied_at < now() - interval '1 day'
                )
                INSERT INTO daily_counts (account_id, app_id, day, sent, failed, gone)
                SELECT u.account_id, u.app_id, u.day::date, u.sent::bigint, u.failed::bigint, u.gone::bigint
                FROM unnest(\(rows.map(\.key.account)), \(rows.map(\.key.app)), \(rows.map(\.key.day)),
                    \(rows.map { String($0.value.sent) }), \(rows.map { String($0.value.failed) }),
                    \(rows.map { String($0.value.gone) })) AS u(account_id, app_id, day, sent, failed, gone)
                JOIN accounts a ON a.id = u.account_id
                WHERE EXISTS (SELECT 1 FROM transfer)
                ON CONFLICT (account_id, app_id, day) DO UPDATE SET
                    sent = daily_counts.sent + EXCLUDED.sent,
                    failed = daily_counts.failed + EXCLUDED.failed,
                    gone = daily_counts.gone + EXCLUDED.gone
                """))
    }
}
