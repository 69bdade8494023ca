/// Waiting for something that happens on another thread or process.
package enum Poll {
    /// Checks `condition` every `interval` until it holds or `timeout` passes, and
    /// always once more after the deadline: a test starved of CPU (the test runner
    /// shares two cores) must not time out on a condition that did come true.
    package static func until(
        timeout: Duration, interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
    ) async throws -> Bool {
        let end = ContinuousClock.now + timeout
        while ContinuousClock.now < end {
            if try await condition() { return true }
            try await Task.sleep(for: interval)
        }
        return try await condition()
    }
}
