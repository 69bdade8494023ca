import Shared

/// `/healthz` (the process answers), `/readyz` (Postgres and Redis answer) and
/// `/metrics` (Prometheus text).
struct HealthRoutes: Sendable {
    let redis: RedisClient
    let postgres: PostgresClient
    let metrics: IngressMetrics

    func healthz() -> HTTPResponse { .json(200, #"{"status":"ok"}"#) }

    func readyz() async -> HTTPResponse {
        async let redisUp = Self.check { try await redis.send("PING") == .status("PONG") }
        async let postgresUp = Self.check { try await postgres.query("SELECT 1").count == 1 }
        let (redisOK, postgresOK) = await (redisUp, postgresUp)
        let body = "{\"redis\":\"\(redisOK ? "ok" : "down")\",\"postgres\":\"\(postgresOK ? "ok" : "down")\"}"
        return .json(redisOK && postgresOK ? 200 : 503, body)
    }

    func metricsText() -> HTTPResponse {
        .text(200, metrics.registry.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
    }

    /// Bounded: a server that does not answer within 2 s counts as down.
    private static func check(_ probe: @escaping @Sendable () async throws -> Bool) async -> Bool {
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
