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
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":1500}"#)
            let worker = try await stack.startWorker([
                "WORKER_MAX_IN_FLIGHT": "4", "WORKER_MAX_IN_FLIGHT_PER_DESTINATION": "2",
            ])
            // The sandbox destination is seen to be slow (its answers take 1.5 s)...
            for _ in 0..<2 {
                let (id, _, _) = try await stack.subscribe(sandbox: true)
                #expect(try await stack.push(id).status == 201)
            }
            try await eventually("the first two answered") { stack.recordings().count == 2 }
            // ...so of six more, two go at a time, and production's message does not
            // wait behind four of them.
            var slowTokens: [String] = []
            for _ in 0..<6 {
                let (id, _, token) = try await stack.subscribe(sandbox: true)
                #expect(try await stack.push(id).status == 201)
                slowTokens.append(token)
            }
            let (otherID, _, otherToken) = try await stack.subscribe()
            #expect(try await stack.push(otherID).status == 201)
            try await eventually("all delivered", timeout: .seconds(30)) { stack.recordings().count >= 9 }
            let order = stack.recordings().dropFirst(2).map(\.deviceToken)
            #expect(order.prefix(3).contains(otherToken), "\(order.firstIndex(of: otherToken) ?? -1)")
            for token in slowTokens + [otherToken] { #expect(stack.recordings(token: token).count == 1) }
            #expect(worker.metrics.retries.value("destination_busy") > 0)
            try await eventually("the queue empty") { try await stack.isDrained() }
            #expect(try await stack.quota() == 9)
        }
    }

    /// A destination that answers promptly is not bounded: one app's backlog needs
    /// more in flight than the bound to drain at full speed.
    @Test func aPromptDestinationIsNotBounded() {
        let slots = DestinationSlots(limit: 2)
        let start = ContinuousClock.now
        #expect(slots.take("a", upTo: 5, now: start) == 5)
        slots.give("a", elapsed: .milliseconds(20), now: start + .milliseconds(20))
        #expect(slots.take("a", upTo: 5, now: start + .milliseconds(30)) == 5)
        // Answers that take seconds make it slow: bounded to what is left of 2.
        let slow = DestinationSlots(limit: 2)
        _ = slow.take("b", upTo: 3, now: start)
        slow.give("b", elapsed: .seconds(3), now: start + .seconds(3))
        #expect(slow.take("b", upTo: 3, now: start + .seconds(3)) == 0)  // 2 still in flight
        // So does no answer at all for a second while at the bound (a black hole).
        let silent = DestinationSlots(limit: 2)
        #expect(silent.take("c", upTo: 2, now: start) == 2)
        #expect(silent.take("c", upTo: 1, now: start + .milliseconds(500)) == 1)
        #expect(silent.take("c", upTo: 1, now: start + .milliseconds(1500)) == 0)
    }
}
