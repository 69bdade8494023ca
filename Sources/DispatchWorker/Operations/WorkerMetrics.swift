import Shared

/// The worker's Prometheus metrics (`/metrics`). Aggregates only: nothing here (or
/// in the logs, at the default level) records an individual send. A class: every
/// message's task holds it, and a struct of this many references would be
/// retained and released field by field each time.
final class WorkerMetrics: Sendable {
    let registry: MetricsRegistry
    /// Final outcomes by `outcome` (sent, gone, failed, expired, discarded) and `reason`.
    let sends: Counter
    let apnsLatency: Histogram
    /// `apnsLatency`'s one series, resolved once (the per-send update takes one lock).
    let apnsLatencySeries: Histogram.Series
    /// Seconds since the oldest entry still on a stream was added (entries are
    /// deleted once acknowledged). The HPA in deploy/kubernetes/worker.yaml scales on it.
    let queueLag: Gauge
    let queueLength: Gauge
    let retryScheduled: Gauge
    let deadLetterLength: Gauge
    let newestDeadLetter: Gauge
    let inFlight: Gauge
    let openConnections: Gauge
    let retries: Counter
    let deadLetters: Counter
    let claimed: Counter
    let circuitRaised: Counter
    /// APNs requests whose payload left out `c`: the ciphertext would have passed
    /// APNs's 4 KB, so the app shows the placeholder. A sender padding every message
    /// to 4 KB (webpush-go's default record size) shows up here.
    let ciphertextOmitted: Counter
    /// Messages that waited in the queue and were checked before going out
    /// (`RetriedSubscriptionCheck`), by how: `log` (no recent revocation concerned
    /// them) or `lookup` (looked up in Postgres).
    let waitedChecks: Counter
    /// Sent messages not yet added to `sends` (added per acknowledged batch with one
    /// atomic add; `flush()` moves it into the labelled counter before each rendering).
    let sentSinceFlush = SentCounter()

    init(registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        sends = registry.counter(
            "pushgate_worker_sends_total", help: "Messages finished, by outcome and reason.",
            labels: ["outcome", "reason"])
        apnsLatency = registry.histogram(
            "pushgate_worker_apns_request_duration_seconds",
            help: "From handing a request to the APNs client to its answer.")
        apnsLatencySeries = apnsLatency.series()
        queueLag = registry.gauge(
            "pushgate_queue_lag_seconds", help: "Age of the oldest unacknowledged entry on the stream.",
            labels: ["stream"])
        queueLength = registry.gauge(
            "pushgate_worker_queue_length",
            help: "Entries on the stream (read or not, not yet acknowledged), each up to 32 messages.",
            labels: ["stream"])
        retryScheduled = registry.gauge(
            "pushgate_worker_retry_scheduled", help: "Messages waiting in the delayed-retry set.", labels: ["stream"])
        deadLetterLength = registry.gauge(
            "pushgate_worker_dead_letter_length", help: "Entries in the dead-letter stream.", labels: ["stream"])
        newestDeadLetter = registry.gauge(
            "pushgate_worker_dead_letter_newest_timestamp_seconds",
            help:
                "When the newest entry of the dead-letter stream was added (UNIX seconds, Redis's clock), 0 for none.",
            labels: ["stream"])
        inFlight = registry.gauge("pushgate_worker_in_flight", help: "Messages this process is working on.")
        openConnections = registry.gauge(
            "pushgate_worker_apns_connections_open", help: "HTTP/2 connections to APNs open in this process.")
        retries = registry.counter(
            "pushgate_worker_retries_total",
            help: "Times a message went into the delayed-retry set (one waiting out an outage: each look), by cause.",
            labels: ["cause"])
        deadLetters = registry.counter(
            "pushgate_worker_dead_letters_total",
            help: "Messages moved to the dead-letter stream (an unreadable entry counts one), by reason.",
            labels: ["reason"])
        claimed = registry.counter(
            "pushgate_worker_claimed_total",
            help: "Entries taken back unacknowledged: from other consumers after the visibility timeout, "
                + "or left under this worker's name by a predecessor or by a read whose answer was lost.")
        circuitRaised = registry.counter(
            "pushgate_worker_circuit_raised_total", help: "Times a credential/environment circuit flag was raised.")
        ciphertextOmitted = registry.counter(
            "pushgate_worker_ciphertext_omitted_total",
            help: "Notifications delivered without the ciphertext (c), which would have passed 4 KB: placeholder only.")
        waitedChecks = registry.counter(
            "pushgate_worker_waited_checks_total",
            help: "Messages that waited, checked before going out: by the recent revocations alone, or looked up.",
            labels: ["by"])
        // The series alerts watch, at 0 until they happen (`Counter.initialize`).
        for reason in ["deliveries", "unreadable"] { deadLetters.initialize(reason) }
        sends.initialize("failed", "credential_rejected")
        sends.initialize("failed", "credential_missing")
        sends.initialize("failed", "credential_unopenable")
        // The causes of deploy/README's "APNs trouble" and "wrong CREDENTIAL_KEY" rows:
        // a first burst must be a rise from 0 for `rate`/`increase` to see it.
        for cause in [
            "connection", "timeout", "untrusted_server", "protocol_error", "InternalServerError", "ServiceUnavailable",
            "Shutdown", "credential_key", "destination_busy",
        ] {
            retries.initialize(cause)
        }
        claimed.initialize()
        circuitRaised.initialize()
        ciphertextOmitted.initialize()
        for by in ["log", "lookup"] { waitedChecks.initialize(by) }
    }

    /// Adds the sends counted since the last flush to `sends`.
    func flush() {
        let sent = sentSinceFlush.take()
        if sent > 0 { sends.increment(by: Double(sent), "sent", "") }
    }
}
