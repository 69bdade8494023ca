import Testing

@testable import Shared

@Suite struct MetricsTests {
    @Test func rendersCountersGaugesAndHistogramsInPrometheusTextFormat() {
        let registry = MetricsRegistry()
        let requests = registry.counter("pushgate_requests_total", help: "Requests.", labels: ["route", "status"])
        let queue = registry.gauge("pushgate_queue_length", help: "Entries waiting.")
        let latency = registry.histogram(
            "pushgate_latency_seconds", help: "Latency.", labels: ["route"], buckets: [0.01, 0.1])
        requests.increment("webpush", "201")
        requests.increment(by: 2, "webpush", "201")
        requests.increment("register", "400")
        queue.set(7)
        latency.observe(0.005, "webpush")
        latency.observe(0.05, "webpush")
        latency.observe(3, "webpush")
        #expect(
            registry.render() == """
                # HELP pushgate_requests_total Requests.
                # TYPE pushgate_requests_total counter
                pushgate_requests_total{route="register",status="400"} 1
                pushgate_requests_total{route="webpush",status="201"} 3
                # HELP pushgate_queue_length Entries waiting.
                # TYPE pushgate_queue_length gauge
                pushgate_queue_length 7
                # HELP pushgate_latency_seconds Latency.
                # TYPE pushgate_latency_seconds histogram
                pushgate_latency_seconds_bucket{route="webpush",le="0.01"} 1
                pushgate_latency_seconds_bucket{route="webpush",le="0.1"} 2
                pushgate_latency_seconds_bucket{route="webpush",le="+Inf"} 3
                pushgate_latency_seconds_sum{route="webpush"} 3.055
                pushgate_latency_seconds_count{route="webpush"} 3

                """)
    }

    @Test func labelValuesAreEscaped() {
        let registry = MetricsRegistry()
        registry.counter("c", help: "h", labels: ["reason"]).increment("a\"b\\c\nd")
        #expect(registry.render().contains(#"c{reason="a\"b\\c\nd"} 1"#))
    }
}
