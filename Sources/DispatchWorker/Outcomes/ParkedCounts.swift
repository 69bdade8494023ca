import Shared

/// Daily counts a worker could not write to Postgres (a write that failed, or a stop
/// while Postgres is away), kept in a Redis hash (`RedisKeys.parkedCounts`) until a
/// worker that can write them takes them over, so a worker that stops or dies while
/// Postgres is away does not lose them.
/// Last-push times are not kept: each device's next push sets its own.
///
/// A field is one counter: account, app, day and kind (`sent`, `failed`, `gone`),
/// packed (`PackedFields`), so ids of any text stay apart.
struct ParkedCounts: Sendable {
    let redis: RedisClient
    let key: String

    /// KEYS: 1 the hash. ARGV: field, amount, field, amount…
    static let parkScript = RedisScript(
        source: """
            for i = 1, #ARGV, 2 do redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1]) end
            return #ARGV / 2
            """)

    /// KEYS: 1 the hash. Returns its fields and values, and deletes it.
    static let takeScript = RedisScript(
        source: """
            local all = redis.call('HGETALL', KEYS[1])
            redis.call('DEL', KEYS[1])
            return all
            """)

    /// Adds `tallies` to what is parked, in one script run.
    func park(_ tallies: [DailyCounts.Key: DailyCounts.Tally]) async throws {
        var arguments: [any RedisValueConvertible] = []
        for (key, tally) in tallies {
            for (kind, amount) in [("sent", tally.sent), ("failed", tally.failed), ("gone", tally.gone)]
            where amount > 0 {
                arguments.append(Self.field(key, kind: kind))
                arguments.append(amount)
            }
        }
        guard !arguments.isEmpty else { return }
        _ = try await redis.run(Self.parkScript, keys: [key], arguments: arguments).throwingError()
    }

    /// Takes everything parked (read and deleted at once, so two workers never both
    /// take a counter). A field that cannot be read is dropped.
    func takeAll() async throws -> [DailyCounts.Key: DailyCounts.Tally] {
        let reply = try await redis.run(Self.takeScript, keys: [key], arguments: []).throwingError()
        let items = reply.array ?? []
        var tallies: [DailyCounts.Key: DailyCounts.Tally] = [:]
        var index = 0
        while index + 1 < items.count {
            defer { index += 2 }
            guard let field = items[index].bytes, let amount = items[index + 1].string.flatMap({ Int($0) }),
                let (key, kind) = Self.counter(field)
            else { continue }
            switch kind {
            case "sent": tallies[key, default: .init()].sent += amount
            case "failed": tallies[key, default: .init()].failed += amount
            case "gone": tallies[key, default: .init()].gone += amount
            default: continue
            }
        }
        return tallies
    }

    static func field(_ key: DailyCounts.Key, kind: String) -> [UInt8] {
        var packed = PackedFields()
        packed.append(key.account)
        packed.append(key.app)
        packed.append(key.day)
        packed.append(kind)
        return packed.bytes
    }

    static func counter(_ field: [UInt8]) -> (key: DailyCounts.Key, kind: String)? {
        var reader = PackedFields.Reader(field[...])
        guard let account = reader.next(), let app = reader.next(), let day = reader.next(),
            let kind = reader.next(), reader.isAtEnd
        else { return nil }
        func text(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }
        return (DailyCounts.Key(account: text(account), app: text(app), day: text(day)), text(kind))
    }
}
