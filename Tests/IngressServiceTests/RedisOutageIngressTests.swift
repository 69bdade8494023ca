import Foundation
import Synchronization
import TestSupport
import Testing

@testable import IngressService
@testable import Shared

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
            let refusals = RefusalCount()
            let lanes = (0..<8).map { _ in
                Task { () -> [(status: Int, location: String?)] in
                    var answers: [(status: Int, location: String?)] = []
                    while !stopping.isSet {
                        let response = try await app.push(id)
                        answers.append((response.status, response.headers["location"]))
                        if response.status != 201 { refusals.add() }
                    }
                    return answers
                }
            }
            try await Task.sleep(for: .milliseconds(300))
            relay.cut()
            // Held until a push has met it: on a busy machine the lanes may all be
            // between requests when it falls, and a short cut is then bridged by the
            // pool's reconnection without any push seeing it.
            let met = try await Poll.until(timeout: .seconds(10), interval: .milliseconds(50)) { refusals.value > 0 }
            relay.restore()
            // Reconnecting may take a while on a busy machine; then every lane's pushes go through.
            let reconnected = try await Poll.until(timeout: .seconds(10), interval: .milliseconds(50)) {
                try await app.push(id).status == 201
            }
            #expect(reconnected, "pushes are accepted again")
            try await Task.sleep(for: .milliseconds(300))
            stopping.set()
            var answers: [(status: Int, location: String?)] = []
            var lastAnswers: [Int] = []
            for lane in lanes {
                let laneAnswers = try await lane.value
                answers += laneAnswers
                lastAnswers += laneAnswers.suffix(1).map(\.status)
            }

            let refused = answers.filter { $0.status != 201 }
            #expect(met && !refused.isEmpty, "no push met the cut")
            #expect(refused.allSatisfy { $0.status == 503 || $0.status == 500 }, "\(Set(refused.map(\.status)))")
            #expect(lastAnswers == Array(repeating: 201, count: 8), "every lane's pushes are accepted again")
            let accepted = Set(
                answers.filter { $0.status == 201 }.compactMap { $0.location?.split(separator: "/").last })
            let queued = Set(try await app.queueEntries().map { Substring($0.messageID) })
            #expect(!accepted.isEmpty)
            #expect(accepted.isSubset(of: queued), "\(accepted.subtracting(queued).count) answered 201 but not queued")
        }
    }
}

extension RedisOutageIngressTests {
    /// A delete whose cache invalidation cannot be written deletes nothing: the
    /// subscription is not left cached (taking pushes) behind a deleted row, and the
    /// client's next try succeeds. Only the invalidation is cut off (through the relay).
    @Test func aDeleteThatCannotClearTheCacheDeletesNothing() async throws {
        let (relay, redisURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
        defer { relay.close() }
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)  // now cached
            let cutOff = try RedisClient(url: redisURL)
            defer { cutOff.close() }
            let device = try #require(app.app.server.handler as? IngressHandler).device
            let routes = DeviceRoutes(
                subscriptions: device.subscriptions, directory: device.directory, limiter: device.limiter,
                invalidation: CacheInvalidation(redis: cutOff, keys: app.keys), cache: device.cache,
                redis: device.redis,
                keys: device.keys, publicPushBase: device.publicPushBase,
                stashLifetimeMilliseconds: device.stashLifetimeMilliseconds)
            relay.cut()
            let path = "/api/push/v1/subscriptions/\(id)"
            let request = HTTPRequest(
                head: HTTPRequestHead(
                    method: "DELETE", path: path, query: [],
                    headers: HTTPHeaders([("Authorization", "Bearer \(secret)")]), peerAddress: [127, 0, 0, 1]),
                body: [])
            await #expect(throws: (any Error).self) { try await routes.delete(request, id: id, client: "127.0.0.1") }

            #expect(try await app.postgres.query("SELECT 1 FROM subscriptions WHERE id = \(id)").count == 1)
            let again = try await app.request("DELETE", path, headers: [("Authorization", "Bearer \(secret)")])
            #expect(again.status == 204)
            #expect(try await app.push(id).status == 404)
        }
    }
    /// An activation whose cache invalidation cannot be written is saved all the
    /// same (the client is told 5xx): the invalidation is tried again in the
    /// background, so once Redis answers the cached `pending` entry is dropped and
    /// pushes are queued, not stashed for the cache's freshness.
    @Test func anActivationThatCannotClearTheCacheTakesEffectOnceRedisAnswers() async throws {
        let (relay, redisURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
        defer { relay.close() }
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            #expect(try await app.push(id).status == 201)  // stashed; the pending entry cached
            let cutOff = try RedisClient(
                url: redisURL,
                options: .init(connection: .init(connectTimeout: .seconds(1), commandTimeout: .seconds(1))))
            defer { cutOff.close() }
            let device = try #require(app.app.server.handler as? IngressHandler).device
            var routes = device
            routes.invalidation = CacheInvalidation(redis: cutOff, keys: app.keys)
            relay.cut()
            let request = HTTPRequest(
                head: HTTPRequestHead(
                    method: "POST", path: "/api/push/v1/subscriptions/\(id)/activate", query: [],
                    headers: HTTPHeaders([("Authorization", "Bearer \(secret)")]), peerAddress: [127, 0, 0, 1]),
                body: [])
            await #expect(throws: (any Error).self) { try await routes.activate(request, id: id, client: "127.0.0.1") }
            #expect(try await app.push(id).status == 201)
            #expect(try await app.queueLength() == 0, "still stashed while the entry says pending")
            relay.restore()
            let queued = try await Poll.until(timeout: .seconds(20), interval: .milliseconds(200)) {
                _ = try await app.push(id)
                return try await app.queueLength() > 0
            }
            #expect(queued)
        }
    }
}

private final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    var isSet: Bool { flag.load(ordering: .relaxed) }
    func set() { flag.store(true, ordering: .relaxed) }
}

private final class RefusalCount: Sendable {
    private let count = Atomic<Int>(0)
    var value: Int { count.load(ordering: .relaxed) }
    func add() { count.add(1, ordering: .relaxed) }
}
