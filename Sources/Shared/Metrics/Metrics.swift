import Foundation
import Synchronization

/// Prometheus metrics kept in process and rendered in the text exposition format
/// (version 0.0.4) for `/metrics`.
///
/// Metrics are registered once (at start-up) and then updated from any thread;
/// an update is one atomic add or a short lock, never I/O.
public final class MetricsRegistry: Sendable {
    private let families = Mutex<[any MetricFamily]>([])

    public init() {}

    public func counter(_ name: String, help: String, labels: [String] = []) -> Counter {
        register(Counter(name: name, help: help, labelNames: labels))
    }

    public func gauge(_ name: String, help: String, labels: [String] = []) -> Gauge {
        register(Gauge(name: name, help: help, labelNames: labels))
    }

    /// A gauge without labels whose value `sample` reads when the metrics are rendered
    /// (a level another object keeps, such as open connections).
    public func sampledGauge(_ name: String, help: String, sample: @escaping @Sendable () -> Double) {
        _ = register(SampledGauge(name: name, help: help, sample: sample))
    }

    /// `buckets` are upper bounds in seconds (or the unit in the name), ascending.
    public func histogram(
        _ name: String, help: String, labels: [String] = [], buckets: [Double] = Histogram.latencyBuckets
    )
        -> Histogram
    {
        register(Histogram(name: name, help: help, labelNames: labels, buckets: buckets))
    }

    private func register<Family: MetricFamily>(_ family: Family) -> Family {
        families.withLock { list in
            precondition(!list.contains { $0.name == family.name }, "metric \(family.name) registered twice")
            list.append(family)
        }
        return family
    }

    /// All metrics in Prometheus text format.
    public func render() -> String {
        let list = families.withLock { $0 }
        var output = ""
        for family in list {
            output += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.typeName)\n"
            family.render(into: &output)
        }
        return output
    }
}

protocol MetricFamily: AnyObject, Sendable {
    var name: String { get }
    var help: String { get }
    var typeName: String { get }
    func render(into output: inout String)
}

/// Label values in the order of the family's label names.
typealias LabelValues = [String]

func renderLabels(_ names: [String], _ values: LabelValues, extra: (String, String)? = nil) -> String {
    var pairs = zip(names, values).map { "\($0)=\(quoteLabel($1))" }
    if let extra { pairs.append("\(extra.0)=\(quoteLabel(extra.1))") }
    return pairs.isEmpty ? "" : "{" + pairs.joined(separator: ",") + "}"
}

private func quoteLabel(_ value: String) -> String {
    "\""
        + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        .replacingOccurrences(of: "\n", with: "\\n") + "\""
}

func formatNumber(_ value: Double) -> String {
    if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    return String(value)
}

/// A monotonically increasing count, optionally split by labels.
public final class Counter: MetricFamily {
    /// The count of one label set, resolved once (`series(_:)`) so a hot path adds
    /// to it without building, hashing or looking up its labels each time.
    public final class Series: Sendable {
        /// nil until first incremented: a series is rendered once it has been used.
        fileprivate let value = Mutex<Double?>(nil)

        public func increment(by amount: Double = 1) { value.withLock { $0 = ($0 ?? 0) + amount } }
    }

    let name: String
    let help: String
    let labelNames: [String]
    var typeName: String { "counter" }
    private let values = Mutex<[LabelValues: Series]>([:])

    init(name: String, help: String, labelNames: [String]) {
        self.name = name
        self.help = help
        self.labelNames = labelNames
    }

    /// The series of `labels` (in the order of the label names), created on first use.
    public func series(_ labels: String...) -> Series { series(labels) }

    private func series(_ labels: LabelValues) -> Series {
        precondition(labels.count == labelNames.count, "\(name) takes labels \(labelNames)")
        return values.withLock { all in
            if let existing = all[labels] { return existing }
            let created = Series()
            all[labels] = created
            return created
        }
    }

    public func increment(by amount: Double = 1, _ labels: String...) { series(labels).increment(by: amount) }

    /// Renders the series of `labels` at 0 from now on. A series that first appears
    /// already at 1 is invisible to `increase()`, so alerts on rare events (dead
    /// letters, a rejected credential) would miss the first one.
    @discardableResult
    public func initialize(_ labels: String...) -> Series {
        let series = series(labels)
        series.value.withLock { $0 = $0 ?? 0 }
        return series
    }

    public func value(_ labels: String...) -> Double {
        values.withLock { $0[labels] }?.value.withLock { $0 } ?? 0
    }

    func render(into output: inout String) {
        for (labels, series) in values.withLock({ $0 }).sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            guard let value = series.value.withLock({ $0 }) else { continue }
            output += "\(name)\(renderLabels(labelNames, labels)) \(formatNumber(value))\n"
        }
    }
}

/// A value that goes up and down (queue length, open connections).
public final class Gauge: MetricFamily {
    let name: String
    let help: String
    let labelNames: [String]
    var typeName: String { "gauge" }
    private let values = Mutex<[LabelValues: Double]>([:])

    init(name: String, help: String, labelNames: [String]) {
        self.name = name
        self.help = help
        self.labelNames = labelNames
    }

    public func set(_ value: Double, _ labels: String...) {
        precondition(labels.count == labelNames.count, "\(name) takes labels \(labelNames)")
        values.withLock { $0[labels] = value }
    }

    public func add(_ amount: Double, _ labels: String...) {
        precondition(labels.count == labelNames.count, "\(name) takes labels \(labelNames)")
        values.withLock { $0[labels, default: 0] += amount }
    }

    public func value(_ labels: String...) -> Double { values.withLock { $0[labels] ?? 0 } }

    func render(into output: inout String) {
        for (labels, value) in values.withLock({ $0 }).sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            output += "\(name)\(renderLabels(labelNames, labels)) \(formatNumber(value))\n"
        }
    }
}

/// A gauge read at rendering (`MetricsRegistry.sampledGauge`).
final class SampledGauge: MetricFamily {
    let name: String
    let help: String
    var typeName: String { "gauge" }
    private let sample: @Sendable () -> Double

    init(name: String, help: String, sample: @escaping @Sendable () -> Double) {
        self.name = name
        self.help = help
        self.sample = sample
    }

    func render(into output: inout String) {
        output += "\(name) \(formatNumber(sample()))\n"
    }
}

/// Observations counted into cumulative buckets, with their sum and count.
public final class Histogram: MetricFamily {
    /// Seconds, from 100 µs to 10 s: request and APNs latencies.
    public static let latencyBuckets: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
    ]

    struct SeriesData {
        var bucketCounts: [UInt64]
        var sum: Double = 0
        var count: UInt64 = 0
    }

    /// The observations of one label set, resolved once (`series(_:)`) so a hot
    /// path records without building, hashing or looking up its labels each time.
    public final class Series: Sendable {
        fileprivate let buckets: [Double]
        fileprivate let data: Mutex<SeriesData>

        fileprivate init(buckets: [Double]) {
            self.buckets = buckets
            data = Mutex(SeriesData(bucketCounts: Array(repeating: 0, count: buckets.count + 1)))
        }

        public func observe(_ value: Double) {
            // Index of the first bucket that holds the value; counts are made cumulative when rendered.
            let index = buckets.firstIndex { value <= $0 } ?? buckets.count
            data.withLock { entry in
                entry.bucketCounts[index] += 1
                entry.sum += value
                entry.count += 1
            }
        }

        /// Observes the time since `start`, in seconds.
        public func observe(since start: ContinuousClock.Instant) {
            observe((ContinuousClock.now - start).inSeconds)
        }
    }

    let name: String
    let help: String
    let labelNames: [String]
    let buckets: [Double]
    var typeName: String { "histogram" }
    private let allSeries = Mutex<[LabelValues: Series]>([:])

    init(name: String, help: String, labelNames: [String], buckets: [Double]) {
        precondition(buckets == buckets.sorted() && !buckets.isEmpty, "histogram buckets must ascend")
        self.name = name
        self.help = help
        self.labelNames = labelNames
        self.buckets = buckets
    }

    /// The series of `labels` (in the order of the label names), created on first use.
    public func series(_ labels: String...) -> Series { series(labels) }

    private func series(_ labels: LabelValues) -> Series {
        precondition(labels.count == labelNames.count, "\(name) takes labels \(labelNames)")
        return allSeries.withLock { all in
            if let existing = all[labels] { return existing }
            let created = Series(buckets: buckets)
            all[labels] = created
            return created
        }
    }

    public func observe(_ value: Double, _ labels: String...) { series(labels).observe(value) }

    /// Observes the time since `start`, in seconds.
    public func observe(since start: ContinuousClock.Instant, _ labels: [String] = []) {
        series(labels).observe(since: start)
    }

    public func count(_ labels: String...) -> UInt64 {
        allSeries.withLock { $0[labels] }?.data.withLock { $0.count } ?? 0
    }

    func render(into output: inout String) {
        for (labels, handle) in allSeries.withLock({ $0 }).sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            let entry = handle.data.withLock { $0 }
            guard entry.count > 0 else { continue }  // resolved but never observed
            var cumulative: UInt64 = 0
            for (index, bound) in (buckets + [Double.infinity]).enumerated() {
                cumulative += entry.bucketCounts[index]
                output +=
                    "\(name)_bucket\(renderLabels(labelNames, labels, extra: ("le", formatNumber(bound)))) \(cumulative)\n"
            }
            output += "\(name)_sum\(renderLabels(labelNames, labels)) \(entry.sum)\n"
            output += "\(name)_count\(renderLabels(labelNames, labels)) \(entry.count)\n"
        }
    }
}
