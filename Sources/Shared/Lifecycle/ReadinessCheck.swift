/// `/readyz` for a service that needs Redis and Postgres: 200 when both answer
/// within two seconds, 503 naming the one that does not. `/readyz?exclude=postgres`
/// (the API server's convention in Kubernetes) asks only for Redis, the one the
/// per-push path needs: pushes to known devices are still accepted and delivered
/// while Postgres is away, so a load balancer's probe must not take every ingress
/// out of service for it. The body names both either way.
public struct ReadinessCheck: Sendable {
    public let redis: RedisClient
    public let postgres: PostgresClient

    public init(redis: RedisClient, postgres: PostgresClient) {
        self.redis = redis
        self.postgres = postgres
    }

    /// The answer to `request` (its query may exclude Postgres).
    public func response(to request: HTTPRequest) async -> HTTPResponse {
        let excludesPostgres = request.head.query.contains { $0.name == "exclude" && $0.value == "postgres" }
        return await response(requiringPostgres: !excludesPostgres)
    }

    public func response(requiringPostgres: Bool = true) async -> HTTPResponse {
        async let redisUp = Self.answers { try await redis.send("PING") == .status("PONG") }
        async let postgresUp = Self.answers { try await postgres.query("SELECT 1").count == 1 }
        let (redisOK, postgresOK) = await (redisUp, postgresUp)
        let body = "{\"redis\":\"\(redisOK ? "ok" : "down")\",\"postgres\":\"\(postgresOK ? "ok" : "down")\"}"
        return .json(redisOK && (postgresOK || !requiringPostgres) ? 200 : 503, body)
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
