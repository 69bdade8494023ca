import Shared

/// The ingress's Prometheus metrics (`/metrics`). Updated with atomic adds and
/// short locks only; nothing is logged per request.
struct IngressMetrics: Sendable {
    let registry: MetricsRegistry
    let requests: Counter
    let latency: Histogram
    let pushes: Counter
    /// The Web Push route's usual series, resolved once.
    let deliverCreated: Counter.Series
    let deliverLatency: Histogram.Series
    let accepted: Counter.Series
    let stashed: Counter.Series

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
        deliverCreated = requests.series(Route.deliver(id: "").label, "201")
        deliverLatency = latency.series(Route.deliver(id: "").label)
        accepted = pushes.series("accepted", "")
        stashed = pushes.series("stashed", "")
    }

    func pushAccepted() { accepted.increment() }
    func pushStashed() { stashed.increment() }
    func pushRejected(_ error: PushAPIError) { pushes.increment(by: 1, "rejected", String(error.code.rawValue)) }
}
