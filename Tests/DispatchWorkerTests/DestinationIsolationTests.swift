import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import DispatchWorker

/// One app's APNs destination (a credential in one environment) answering slowly
/// must not hold up another's: it gets at most `WORKER_MAX_IN_FLIGHT_PER_DESTINATION`
/// of the worker's in-flight permits, and its other messages wait in the
/// delayed-retry set instead of holding the rest. Here sandbox and production share
/// the simulator and its latency, and are two destinations of one credential.
@Suite struct DestinationIsolationTests {
    @Test func aSlowDestinationTakesNoMoreThanItsShareOfTheWorker() async throws {
        try await DeliveryStack.with { stack in
            // Answers take 3 s: production's message is among the first three answered
            // if it goes out less than an answer's time after the first two sandbox
            // ones, which leaves room for a loaded machine (at 1.5 s a clean-clone CI
            // run once saw it fifth).
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":3000}"#)
            let worker = try await stack.startWorker([
                "WORKER_MAX_IN_FLIGHT": "4", "WORKER_MAX_IN_FLIGHT_PER_DESTINATION": "2",
            ])
            // The sandbox destination is seen to be slow (its answers take 3 s)...
            for _ in 0..<2 {
                let (id, _, _) = try await stack.subscribe(sandbox: true)
                #expect(try await stack.push(id).status == 201)
            }
            try await eventually("the first two answered") { stack.recordings().count == 2 }
            // ...so of six more, two go at a time, and production's message does not
            // wait behind four of them.
            let (slowTokens, otherToken) = try await Self.pushSixSandboxThenOneProduction(stack)
            try await eventually("all delivered", timeout: .seconds(30)) { stack.recordings().count >= 9 }
            let order = stack.recordings().dropFirst(2).map(\.deviceToken)
            #expect(order.prefix(3).contains(otherToken), "\(order.firstIndex(of: otherToken) ?? -1)")
            for token in slowTokens + [otherToken] { #expect(stack.recordings(token: token).count == 1) }
            #expect(worker.metrics.retries.value("destination_busy") > 0)
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(try await stack.quota() == 9)
        }
    }

    /// Six pushes to sandbox devices, then one to a production device; their tokens.
    /// The devices are registered first, so the seven pushes follow each other closely
    /// however long registrations take on a busy machine (were the production push
    /// seconds behind, sandbox answers would come before it for that reason alone).
    private static func pushSixSandboxThenOneProduction(_ stack: DeliveryStack) async throws
        -> (sandbox: [String], production: String)
    {
        var sandbox: [(id: String, token: String)] = []
        for _ in 0..<6 {
            let (id, _, token) = try await stack.subscribe(sandbox: true)
            sandbox.append((id, token))
        }
        let (productionID, _, production) = try await stack.subscribe()
        for device in sandbox { #expect(try await stack.push(device.id).status == 201) }
        #expect(try await stack.push(productionID).status == 201)
        return (sandbox.map(\.token), production)
    }

    /// A burst into a destination that has had no answer yet (here: one that has
    /// just stopped answering promptly) stops at the bound: production's message,
    /// queued behind six sandbox ones, goes with the first two instead of waiting for
    /// the sandbox answers. A probe saw another app's notifications 14 s late behind a
    /// burst of 4,000 into a destination that had just gone silent.
    @Test func aBurstToADestinationThatHasNotAnsweredYetStopsAtTheBound() async throws {
        try await DeliveryStack.with { stack in
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":1500}"#)
            let (slowTokens, otherToken) = try await Self.pushSixSandboxThenOneProduction(stack)
            let worker = try await stack.startWorker([
                "WORKER_MAX_IN_FLIGHT": "4", "WORKER_MAX_IN_FLIGHT_PER_DESTINATION": "2",
            ])
            try await eventually("all delivered", timeout: .seconds(30)) { stack.recordings().count >= 7 }
            let order = stack.recordings().map(\.deviceToken)
            #expect(order.prefix(3).contains(otherToken), "\(order.firstIndex(of: otherToken) ?? -1)")
            for token in slowTokens + [otherToken] { #expect(stack.recordings(token: token).count == 1) }
            #expect(worker.metrics.retries.value("destination_busy") > 0)
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(try await stack.quota() == 7)
        }
    }

    /// A destination's window starts at the bound and grows by one with each prompt
    /// answer, so a backlog drained at full speed gets more in flight than the bound
    /// once its answers show it takes them; slow answers, or none for a second, bring
    /// it back to the bound.
    @Test func theWindowGrowsWithPromptAnswersAndFallsBackWhenSlow() {
        let start = ContinuousClock.now
        let slots = DestinationSlots(limit: 2, ceiling: 4)
        #expect(slots.take("a", upTo: 5, now: start) == 2)  // a new destination: the bound
        slots.give("a", elapsed: .milliseconds(20), now: start + .milliseconds(20))
        #expect(slots.take("a", upTo: 5, now: start + .milliseconds(30)) == 2)  // window 3
        slots.give("a", elapsed: .milliseconds(20), now: start + .milliseconds(50))
        slots.give("a", elapsed: .milliseconds(20), now: start + .milliseconds(50))
        #expect(slots.take("a", upTo: 9, now: start + .milliseconds(60)) == 3)  // window 4, the ceiling
        // No answer for over a second with messages on their way: back to the bound.
        #expect(slots.take("a", upTo: 9, now: start + .milliseconds(1100)) == 0)
        for _ in 0..<4 { slots.give("a", elapsed: .milliseconds(20), now: start + .milliseconds(1200)) }
        // Nothing in flight and a prompt record: forgotten, the bound again.
        #expect(slots.take("a", upTo: 9, now: start + .milliseconds(1300)) == 2)

        // Answers that take seconds make it slow: it stays at the bound, and is kept.
        let slow = DestinationSlots(limit: 2, ceiling: 4)
        _ = slow.take("b", upTo: 3, now: start)
        slow.give("b", elapsed: .seconds(3), now: start + .seconds(3))
        // Its surplus waits about an answer's time (weighted average: 0 and 3 s), or
        // as long as it has been silent with messages on their way, if longer.
        #expect(slow.answerTimeMilliseconds("b", now: start + .seconds(3)) == 1500)
        #expect(slow.answerTimeMilliseconds("b", now: start + .seconds(5)) == 2000)
        #expect(slow.answerTimeMilliseconds("unknown") == 0)
        #expect(slow.take("b", upTo: 3, now: start + .seconds(3)) == 1)
        slow.give("b", elapsed: .seconds(3), now: start + .seconds(6))
        slow.give("b", elapsed: .seconds(3), now: start + .seconds(6))
        #expect(slow.take("b", upTo: 3, now: start + .seconds(6)) == 2)
    }
}
