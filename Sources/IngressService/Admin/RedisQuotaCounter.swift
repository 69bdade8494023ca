import Shared

/// The ingress's monthly quota counter in Redis (`RedisKeys.quota`): pushes accepted,
/// minus those whose send failed.
struct RedisQuotaCounter: QuotaCounter {
    let redis: RedisClient
    let keys: RedisKeys

    func used(accountID: String, month: String) async throws -> Int? {
        try await redis.send("GET", keys.quota(account: accountID, month: month)).throwingError().int.map { Int($0) }
    }

    func forget(accountID: String, months: [String]) async throws {
        let counters = months.map { keys.quota(account: accountID, month: $0) }
        _ = try await redis.send(RedisCommand("DEL", arguments: counters)).throwingError()
    }
}
