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
            var slowTokens: [String] = []
            for _ in 0..<6 {
                let (id, _, token) = try await stack.subscribe(sandbox: true)
                #expect(try await stack.push(id).status == 201)
                slowTokens.append(token)
            }
            let (otherID, _, otherToken) = try await stack.subscribe()
            #expect(try await stack.push(otherID).status == 201)  // queued behind all six
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":1500}"#)
            let worker = try await stack.startWorker([
                "WORKER_MAX_IN_FLIGHT": "4", "WORKER_MAX_IN_FLIGHT_PER_DESTINATION": "2",
            ])
            try await eventually("all seven delivered", timeout: .seconds(30)) { stack.recordings().count >= 7 }
            // Two of the six at a time: the other destination's message went with the
            // first two (answered with them), not after four of them.
            let order = stack.recordings().map(\.deviceToken)
            #expect(order.prefix(3).contains(otherToken), "\(order.firstIndex(of: otherToken) ?? -1)")
            for token in slowTokens + [otherToken] { #expect(stack.recordings(token: token).count == 1) }
            #expect(worker.metrics.retries.value("destination_busy") > 0)
            try await eventually("the queue empty") { try await stack.isEmptyWithRetries() }
            #expect(try await stack.quota() == 7)
        }
    }
}
