import Shared

/// The ingress's Prometheus metrics (`/metrics`). Updated with atomic adds and
/// short locks only; nothing is logged per request.
struct IngressMetrics: Sendable {
    let registry: MetricsRegistry
    let requests: Counter
    let latency: Histogram
    let pushes: Counter

    init(registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        requests = registry.counter(
            "pushgate_ingress_requests_total", help: "HTTP requests answered, by route and status.",
            labels: ["route", "status"])
        latency = registry.histogram(
            "pushgate_ingress_request_duration_seconds", help: "Time from a complete request to its answer.",
            labels: ["route"])
        pushes = registry.counter(
            "pushgate_ingress_pushes_total",
            help: "Web Push deliveries: accepted (queued), stashed (pending), or rejected with their error code.",
            labels: ["outcome", "code"])
    }

    func pushAccepted() { pushes.increment(by: 1, "accepted", "") }
    func pushStashed() { pushes.increment(by: 1, "stashed", "") }
    func pushRejected(_ error: PushAPIError) { pushes.increment(by: 1, "rejected", String(error.code.rawValue)) }
}
