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
    let discarded: Counter.Series
    /// Refreshes of aged cache entries that Postgres could not answer, after which
    /// the push went on with the entry as last read (`HotPathCache.refresh`).
    let cacheRefreshFailures: Counter.Series
    /// Web Push pushes (502, 1007) and App API messages (`failed`) the ingress refused
    /// as undeliverable, by why: the workers never see them, so theirs is the only
    /// count of an app left without a usable credential.
    let undeliverable: Counter
    /// App API messages by the status (and reason) their send answered.
    let appAPIMessages: Counter
    /// Subscriptions the stale-subscription sweep deleted on this replica.
    let sweptSubscriptions: Counter.Series

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
            help:
                "Web Push deliveries: accepted (queued), stashed (pending), discarded (pending, TTL 0), or rejected"
                + " with their error code.",
            labels: ["outcome", "code"])
        deliverCreated = requests.series(Route.deliver(id: "").label, "201")
        deliverLatency = latency.series(Route.deliver(id: "").label)
        accepted = pushes.series("accepted", "")
        stashed = pushes.series("stashed", "")
        discarded = pushes.series("discarded", "")
        cacheRefreshFailures = registry.counter(
            "pushgate_ingress_cache_refresh_failures_total",
            help: "Refreshes of cache entries past their lifetime that Postgres could not answer; the push went on"
                + " with the entry as last read."
        ).initialize()
        undeliverable = registry.counter(
            "pushgate_ingress_undeliverable_total",
            help: "Web Push pushes (502, 1007) and App API messages (failed) refused at the ingress as"
                + " undeliverable: the app has no credential, its credential was rejected, or the circuit is up.",
            labels: ["reason"])
        for reason in ["credential_missing", "credential_rejected", "circuit"] { _ = undeliverable.initialize(reason) }
        appAPIMessages = registry.counter(
            "pushgate_ingress_app_api_messages_total",
            help: "App API messages by the status and reason their 200 answered (batches refused whole are not).",
            labels: ["status", "reason"])
        sweptSubscriptions = registry.counter(
            "pushgate_ingress_swept_subscriptions_total",
            help: "Subscriptions not refreshed for SUBSCRIPTION_MAX_AGE_SECONDS that this replica's sweep deleted."
        ).initialize()
    }

    func pushAccepted() { accepted.increment() }
    func pushStashed() { stashed.increment() }
    func pushDiscarded() { discarded.increment() }
    func pushRejected(_ error: PushAPIError) { pushes.increment(by: 1, "rejected", String(error.code.rawValue)) }
    /// `reason` as the hot-path script gives it (`provider_error` is the circuit flag).
    func refusedUndeliverable(_ reason: String) {
        undeliverable.increment(by: 1, reason == "provider_error" ? "circuit" : reason)
    }
}
