import Shared

/// `METRICS_LISTEN`: `/metrics` (Prometheus text, gauges sampled first), `/healthz`
/// (the process answers) and `/readyz` (Redis and Postgres answer and the worker is
/// not stopping).
struct OperationsHandler: HTTPHandler {
    let redis: RedisClient
    let postgres: PostgresClient
    let metrics: WorkerMetrics
    let gauges: QueueGauges
    let isStopping: @Sendable () -> Bool

    func maximumBodySize(for head: HTTPRequestHead) -> Int { 0 }

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        guard request.method == "GET" || request.method == "HEAD" else { return .text(405, "method not allowed\n") }
        switch request.path {
        case "/metrics":
            await gauges.sample()
            return .text(200, metrics.registry.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        case "/healthz":
            return .json(200, #"{"status":"ok"}"#)
        case "/readyz":
            if isStopping() { return .json(503, #"{"status":"stopping"}"#) }
            async let redisUp = Self.check { try await redis.send("PING") == .status("PONG") }
            async let postgresUp = Self.check { try await postgres.query("SELECT 1").count == 1 }
            let (redisOK, postgresOK) = await (redisUp, postgresUp)
            let body = "{\"redis\":\"\(redisOK ? "ok" : "down")\",\"postgres\":\"\(postgresOK ? "ok" : "down")\"}"
            return .json(redisOK && postgresOK ? 200 : 503, body)
        default:
            return .text(404, "not found\n")
        }
    }

    /// A server that does not answer within 2 s counts as down.
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
