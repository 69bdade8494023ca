import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import DispatchWorker

/// The worker's connections to APNs cut while requests are in flight (through a
/// relay in front of the simulator): requests that got no answer are sent again
/// once APNs can be reached, so every accepted push arrives and none fails.
@Suite struct APNsConnectionLossTests {
    @Test func requestsInFlightWhenTheConnectionDiesAreSentAgain() async throws {
        try await DeliveryStack.with(ingress: ["RATE_LIMIT_PUSH": "1000000/60"], plan: "enterprise") { stack in
            let relay = try TCPRelay(upstreamHost: "127.0.0.1", upstreamPort: stack.simulator.listenAddress.port)
            defer { relay.close() }
            let (id, _, _) = try await stack.subscribe()
            let accepted = try await LifecycleTests.pushMany(stack, subscription: id, count: 300)
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":300}"#)
            try await stack.startWorker([
                "APNS_PRODUCTION_URL": "https://localhost:\(relay.port)", "WORKER_MAX_IN_FLIGHT": "100",
            ])
            try await eventually("some delivered") { stack.recordings().count >= 50 }

            relay.cut()
            try await Task.sleep(for: .seconds(1))
            #expect(stack.recordings().count < 300, "the cut came too late to matter")
            relay.restore()
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":0}"#)

            try await eventually("every accepted push delivered", timeout: .seconds(30)) {
                Set(LifecycleTests.delivered(stack)).isSuperset(of: accepted)
            }
            try await eventually("the queue drained", timeout: .seconds(15)) { try await stack.isDrained() }
            #expect(try await stack.streamLength(stack.keys.deadLetters) == 0)
            #expect(try await stack.quota() == 300)  // nothing failed, nothing released
        }
    }
}
