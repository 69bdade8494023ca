import Foundation

/// Delays between attempts to replace a failed connection: exponential, capped,
/// with "equal jitter" (a random point in the upper half of the step), so that
/// many workers do not reconnect in step. Apple treats rapid reconnects as an
/// attack, so a failing pool slows down instead of looping.
public struct ReconnectBackoff: Sendable, Equatable {
    /// The delay after the first failure (before jitter).
    public var initial: Duration
    /// No delay is longer than this.
    public var maximum: Duration
    public var multiplier: Double

    public init(initial: Duration = .milliseconds(500), maximum: Duration = .seconds(60), multiplier: Double = 2) {
        precondition(initial > .zero && maximum >= initial && multiplier >= 1)
        self.initial = initial
        self.maximum = maximum
        self.multiplier = multiplier
    }

    /// The step after `failures` consecutive failures, without jitter: `initial`
    /// after one, growing by `multiplier`, capped at `maximum`; zero after none.
    public func step(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        let seconds = initial.inSeconds * pow(multiplier, Double(min(failures - 1, 62)))
        return seconds >= maximum.inSeconds ? maximum : .nanoseconds(Int64(seconds * 1e9))
    }

    /// The delay to wait: uniformly in [step / 2, step].
    public func delay(afterFailures failures: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let step = step(afterFailures: failures)
        guard step > .zero else { return .zero }
        let fraction = Double.random(in: 0.5...1, using: &generator)
        return .nanoseconds(Int64(step.inSeconds * fraction * 1e9))
    }

    public func delay(afterFailures failures: Int) -> Duration {
        var generator = SystemRandomNumberGenerator()
        return delay(afterFailures: failures, using: &generator)
    }
}
