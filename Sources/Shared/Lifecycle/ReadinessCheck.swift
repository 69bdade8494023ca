/// `/readyz` for a service that needs Redis and Postgres: 200 when both answer
/// within two seconds, 503 naming the one that does not.
public struct ReadinessCheck: Sendable {
    public let redis: RedisClient
    public let postgres: PostgresClient

    public init(redis: RedisClient, postgres: PostgresClient) {
        self.redis = redis
        self.postgres = postgres
    }

    public func response() async -> HTTPResponse {
        async let redisUp = Self.answers { try await redis.send("PING") == .status("PONG") }
        async let postgresUp = Self.answers { try await postgres.query("SELECT 1").count == 1 }
        let (redisOK, postgresOK) = await (redisUp, postgresUp)
        let body = "{\"redis\":\"\(redisOK ? "ok" : "down")\",\"postgres\":\"\(postgresOK ? "ok" : "down")\"}"
        return .json(redisOK && postgresOK ? 200 : 503, body)
    }

    /// Bounded: a server that does not answer within 2 s counts as down.
    private static func answers(_ probe: @escaping @Sendable () async throws -> Bool) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { (try? await probe()) ?? false }
            group.addTask {
                try? await Task.sleep(for: .seconds(2))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}
