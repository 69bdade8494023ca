extension Duration {
    /// The duration in seconds, as a `Double` (histograms, averages, backoff arithmetic).
    public var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
