import Shared

/// `/healthz` (the process answers), `/readyz` (Postgres and Redis answer;
/// `?exclude=postgres`: Redis, `ReadinessCheck`) and `/metrics` (Prometheus text).
struct HealthRoutes: Sendable {
    let readiness: ReadinessCheck
    let metrics: IngressMetrics

    func healthz() -> HTTPResponse { .json(200, #"{"status":"ok"}"#) }

    func readyz(_ request: HTTPRequest) async -> HTTPResponse { await readiness.response(to: request) }

    func metricsText() -> HTTPResponse {
        .text(200, metrics.registry.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
    }
}
