import Foundation
import Shared
import Synchronization
import TestSupport
import Testing

@testable import IngressService

/// The ingress's Redis connections cut while pushes are in flight (through a relay,
/// so the shared server and the other suites are untouched): a push whose script
/// ran but whose answer was lost is answered 5xx (the sender retries: a duplicate
/// at worst), and every 201 names a message that is on the queue.
@Suite struct RedisOutageIngressTests {
    @Test func aConnectionCutMidFlightNeverYieldsAFalse201() async throws {
        let (relay, redisURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
        defer { relay.close() }
        try await IngressTestApp.with(["REDIS_URL": redisURL, "RATE_LIMIT_PUSH": "1000000/60"]) { app in
            let fixture = try await Fixture.create(app.postgres, plan: "enterprise")
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let stopping = StopSignal()
            let lanes = (0..<8).map { _ in
                Task { () -> [(status: Int, location: String?)] in
                    var answers: [(status: Int, location: String?)] = []
                    while !stopping.isSet {
                        let response = try await app.push(id)
                        answers.append((response.status, response.headers["location"]))
                    }
                    return answers
                }
            }
            try await Task.sleep(for: .milliseconds(300))
            relay.cut()
            try await Task.sleep(for: .milliseconds(500))
            relay.restore()
            try await Task.sleep(for: .milliseconds(1000))
            stopping.set()
            var answers: [(status: Int, location: String?)] = []
            for lane in lanes { answers += try await lane.value }

            let refused = answers.filter { $0.status != 201 }
            #expect(!refused.isEmpty, "no push met the cut")
            #expect(refused.allSatisfy { $0.status == 503 || $0.status == 500 }, "\(Set(refused.map(\.status)))")
            #expect(answers.suffix(8).allSatisfy { $0.status == 201 }, "pushes are accepted again")
            let accepted = Set(
                answers.filter { $0.status == 201 }.compactMap { $0.location?.split(separator: "/").last })
            let queued = Set(try await app.queueEntries().map { Substring($0.messageID) })
            #expect(!accepted.isEmpty)
            #expect(accepted.isSubset(of: queued), "\(accepted.subtracting(queued).count) answered 201 but not queued")
        }
    }
}

private final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}
