import Testing

@testable import Shared

@Suite struct APNsReconnectBackoffTests {
    /// A deterministic generator, so the jitter is reproducible.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    let backoff = ReconnectBackoff(initial: .milliseconds(500), maximum: .seconds(30))

    @Test func stepsDoubleFromTheInitialDelayUpToTheCap() {
        #expect(backoff.step(afterFailures: 0) == .zero)
        let steps = (1...10).map { backoff.step(afterFailures: $0) }
        #expect(
            steps == [
                .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30),
                .seconds(30), .seconds(30), .seconds(30),
            ])
        #expect(backoff.step(afterFailures: 10_000) == .seconds(30))
    }

    @Test func jitteredDelaysStayWithinTheUpperHalfOfTheStepAndVary() {
        var generator = SplitMix(state: 42)
        for failures in 1...12 {
            let step = backoff.step(afterFailures: failures)
            var seen = Set<Duration>()
            for _ in 0..<200 {
                let delay = backoff.delay(afterFailures: failures, using: &generator)
                #expect(
                    delay >= step / 2 && delay <= step, "failures \(failures): \(delay) outside [\(step / 2), \(step)]")
                seen.insert(delay)
            }
            #expect(seen.count > 150, "jitter should spread the delays")
        }
        #expect(backoff.delay(afterFailures: 0, using: &generator) == .zero)
    }
}

@Suite struct DurationConversionTests {
    @Test func secondsAndWholeMillisecondsOfADuration() {
        #expect(Duration.milliseconds(1500).inSeconds == 1.5)
        #expect(Duration.seconds(60).inWholeMilliseconds == 60_000)
        #expect(Duration.microseconds(2_999).inWholeMilliseconds == 2)  // rounded down
        #expect(Duration.zero.inWholeMilliseconds == 0)
    }
}
