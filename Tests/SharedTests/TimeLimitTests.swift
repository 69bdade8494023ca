import Testing

@testable import Shared

@Suite struct TimeLimitTests {
    @Test func aTaskDoneInTimeGivesItsValueOrError() async throws {
        let quick = Task<Int, any Error> { 42 }
        #expect(try await quick.value(waitingAtMost: .seconds(5)) == 42)
        struct Refused: Error {}
        let failing = Task<Int, any Error> { throw Refused() }
        await #expect(throws: Refused.self) { try await failing.value(waitingAtMost: .seconds(5)) }
    }

    /// The wait ends at the limit; the task itself is left to finish (a blocked C
    /// call could not be stopped anyway).
    @Test func aSlowTaskIsGivenUpOnAtTheLimitAndLeftRunning() async throws {
        let slow = Task<Int, any Error> {
            try? await Task.sleep(for: .milliseconds(300))
            return 7
        }
        await #expect(throws: TimeLimitExceeded.self) { try await slow.value(waitingAtMost: .milliseconds(20)) }
        #expect(!slow.isCancelled)
        #expect(try await slow.value == 7)
    }
}
