import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// Postgres is the system of record but not on the per-push path: while this
/// stack's ingress and worker cannot reach it (through a relay the test cuts, so the
/// shared server and other suites are untouched), pushes to known devices are
/// still accepted and delivered, and what the worker owes Postgres is written once
/// it is back.
@Suite struct PostgresOutageTests {
    @Test func pushesAreAcceptedAndDeliveredWithoutPostgresAndTheirCountsWrittenAfter() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await DeliveryStack.with(ingress: ["DATABASE_URL": databaseURL]) { stack in
            let worker = try await stack.startWorker(["DATABASE_URL": databaseURL])
            let device = try await stack.subscribe()
            #expect(try await stack.push(device.id).status == 201)
            try await eventually("the first push delivered and counted") {
                try await stack.dailyCounts().sent == 1
            }

            relay.cut()
            var statuses: [Int] = []
            for _ in 0..<20 { statuses.append(try await stack.push(device.id).status) }
            #expect(statuses.allSatisfy { $0 == 201 }, "\(statuses)")
            try await eventually("the pushes accepted without Postgres delivered") {
                stack.recordings(token: device.token).count == 21
            }
            let json = #"{"topic": "\#(stack.fixture.topic)", "token": "\#(Fixture.token())", "sandbox": false}"#
            let registration = try await stack.request("POST", "/api/push/v1/subscriptions", body: Array(json.utf8))
            #expect(registration.status == 503)
            #expect(registration.text == #"{"error": "1005 Storage error"}"#)

            // A write of the counts now fails; they wait in the worker, not lost.
            #expect(await worker.counts.flush() == false)

            relay.restore()
            try await eventually("the daily counts written once Postgres is back") {
                try await stack.dailyCounts().sent == 21
            }
        }
    }
}
