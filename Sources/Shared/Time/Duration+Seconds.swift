extension Duration {
    /// The duration in seconds, as a `Double` (histograms, averages, backoff arithmetic).
    public var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// The duration in whole milliseconds, rounded down (Redis's `PX`, `IDLE` and
    /// `XCLAIM` times).
    public var inWholeMilliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
