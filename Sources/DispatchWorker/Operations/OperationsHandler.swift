import Shared

/// `METRICS_LISTEN`: `/metrics` (Prometheus text; queue gauges as last sampled), `/healthz`
/// (the process answers) and `/readyz` (Redis and Postgres answer and the worker is
/// not stopping; `?exclude=postgres`: Redis, `ReadinessCheck`).
struct OperationsHandler: HTTPHandler {
    let readiness: ReadinessCheck
    let metrics: WorkerMetrics
    let gauges: QueueGauges
    let isStopping: @Sendable () -> Bool

    func maximumBodySize(for head: HTTPRequestHead) -> Int { 0 }

    private enum Route: String {
        case metrics = "/metrics"
        case healthz = "/healthz"
        case readyz = "/readyz"
    }

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        guard let route = Route(rawValue: request.path) else { return .text(404, "not found\n") }
        guard request.method == "GET" || request.method == "HEAD" else {
            var response = HTTPResponse.text(405, "method not allowed\n")
            response.headers.add("Allow", "GET, HEAD")  // RFC 9110 §15.5.6
            return response
        }
        switch route {
        case .metrics:
            // The queue gauges are the sampler's (`QueueGauges.run`, every 2 s): a scrape
            // that waited on Redis would time out in the very outage it should show.
            gauges.sampleProcess()
            return .text(200, metrics.registry.render(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        case .healthz:
            return .json(200, #"{"status":"ok"}"#)
        case .readyz:
            if isStopping() { return .json(503, #"{"status":"stopping"}"#) }
            return await readiness.response(to: request)
        }
    }
}
