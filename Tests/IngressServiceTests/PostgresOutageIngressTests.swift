import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// The ingress cut off from Postgres (through a relay, so the shared server and the
/// other suites are untouched): what Redis knows is still served, and what needs
/// Postgres fails as a storage error. Never a 404 or 410, which would tell a sender
/// to drop a push URL that still works.
@Suite struct PostgresOutageIngressTests {
    @Test func aPushThatNeedsPostgresIs503NeverANotFound() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await IngressTestApp.with(["DATABASE_URL": databaseURL]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (cached, _) = try await app.subscribe(topic: fixture.topic)
            let (uncached, secret) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(cached).status == 201)
            // As if its cache entry had expired or been evicted.
            _ = try await app.redis.send("DEL", app.keys.subscription(uncached))

            relay.cut()
            #expect(try await app.push(cached).status == 201)
            let push = try await app.push(uncached)
            #expect(push.status == 503)
            #expect(push.text == errorBody(1005, "Storage error"))
            // Malformed, so its URL's fate is looked up: unknown to Redis, so Postgres is asked.
            let malformed = try await app.push(uncached, headers: [("Content-Encoding", "aes128gcm")])
            #expect(malformed.status == 400)
            let pending = try await app.request(
                "GET", "/api/push/v1/subscriptions/\(uncached)/pending",
                headers: [("Authorization", "Bearer \(secret)")])
            #expect(pending.status == 503)
            #expect(pending.text == errorBody(1005, "Storage error"))
            #expect(try await app.request("GET", "/readyz").status == 503)
            // What a load balancer asks: pushes to known devices are still served.
            let redisOnly = try await app.request("GET", "/readyz?exclude=postgres")
            #expect(redisOnly.status == 200)
            #expect(redisOnly.text == #"{"redis":"ok","postgres":"down"}"#)

            relay.restore()
            let servedAgain = try await Poll.until(timeout: .seconds(10), interval: .milliseconds(100)) {
                try await app.push(uncached).status == 201
            }
            #expect(servedAgain, "the uncached subscription is served again once Postgres is back")
            #expect(try await app.queueLength() == 3)
        }
    }

    /// Cache entries outlive their freshness: while Postgres cannot be read, a push
    /// whose entries went stale is still accepted from them (not 503 once the cache
    /// lifetime has run out), and once Postgres is back they are read again.
    /// A subscription whose cache entries (its own, its app's, its account's) are in:
    /// a push to it accepted. They are filled one after another; on a busy machine the
    /// first may go stale before the last is in, and the push is refused (a fill per
    /// run, `HotPathCache.maximumScriptRuns`): then again.
    static func subscribeAndCache(_ app: IngressTestApp) async throws -> String {
        let fixture = try await Fixture.create(app.postgres)
        let (id, _) = try await app.subscribe(topic: fixture.topic)
        let accepted = try await Poll.until(timeout: .seconds(10), interval: .milliseconds(10)) {
            try await app.push(id).status == 201
        }
        #expect(accepted)
        return id
    }

    @Test func staleCacheEntriesAnswerWhilePostgresCannotBeRead() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await IngressTestApp.with(["DATABASE_URL": databaseURL, "CACHE_TTL_SECONDS": "1"]) { app in
            let id = try await Self.subscribeAndCache(app)
            let queuedBefore = try await app.queueLength()
            let oldToken = try await app.queueEntries().last?.deviceToken

            relay.cut()
            try await Task.sleep(for: .milliseconds(1200))  // every entry past its freshness
            var statuses: [Int] = []
            for _ in 0..<3 { statuses.append(try await app.push(id).status) }
            #expect(statuses == [201, 201, 201])
            #expect(try await app.queueLength() == queuedBefore + 3)
            let metrics = try await app.request("GET", "/metrics").text
            // Each of the subscription's, app's and account's entries: claimed once, not read.
            #expect(metrics.contains("pushgate_ingress_cache_refresh_failures_total 3\n"))
            #expect(try await app.queueEntries().last?.deviceToken == oldToken)

            relay.restore()
            try await Self.expectReadAgain(id, app)
        }
    }

    /// A change made behind the cache's back, which only a refresh from Postgres
    /// shows, reaches the queue within seconds: the refresh claimed during an outage
    /// leaves the next one to its lease's end (5 s).
    static func expectReadAgain(_ id: String, _ app: IngressTestApp) async throws {
        let newToken = Fixture.token()
        try await app.postgres.execute("UPDATE subscriptions SET device_token = \(newToken) WHERE id = \(id)")
        let refreshed = try await Poll.until(timeout: .seconds(15), interval: .milliseconds(100)) {
            guard try await app.push(id).status == 201 else { return false }
            return try await app.queueEntries().last?.deviceToken == newToken
        }
        #expect(refreshed, "read again from Postgres once it answers")
    }

    /// A Postgres that does not answer at all (frozen, or a network dropping
    /// everything) holds a push to a stale entry no longer than the refresh's short
    /// wait: it is accepted from the stale entry, as when Postgres refuses. Later
    /// pushes do not wait at all until Postgres answers again (with a quiet period of
    /// 2 s instead, a push per entry every 5 s, its refresh lease, waited 0.5 s
    /// through the whole freeze), and once it does the entries are read again.
    @Test func aFrozenPostgresDoesNotHoldPushesToStaleEntries() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await IngressTestApp.with(["DATABASE_URL": databaseURL, "CACHE_TTL_SECONDS": "1"]) { app in
            let id = try await Self.subscribeAndCache(app)

            relay.freeze()
            try await Task.sleep(for: .milliseconds(1200))  // every entry past its freshness
            var statuses: [Int] = []
            for _ in 0..<3 {
                // Bounded, so that a push held by the freeze fails the test instead of hanging it.
                statuses.append(try await withTimeLimit(.seconds(5)) { try await app.push(id).status })
            }
            #expect(statuses == [201, 201, 201])
            var slowest = Duration.zero
            // Past the 5 s lease of the refresh claimed above, when a push is asked to refresh again.
            let until = ContinuousClock.now + .seconds(7)
            while ContinuousClock.now < until {
                let started = ContinuousClock.now
                #expect(try await withTimeLimit(.seconds(5)) { try await app.push(id).status } == 201)
                slowest = max(slowest, ContinuousClock.now - started)
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(slowest < .milliseconds(300), "a push waited \(slowest) on the frozen Postgres")

            relay.thaw()
            try await Self.expectReadAgain(id, app)
        }
    }

    /// A Postgres that does not answer holds what needs it (device requests, a push to
    /// a subscription not cached) a few seconds, then answers 503 (1005); without a
    /// limit they waited, connections held, as long as the freeze. Pushes served from
    /// the cache go on meanwhile.
    @Test func aFrozenPostgresHoldsDeviceRequestsAndUncachedPushesOnlyBriefly() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await IngressTestApp.with(["DATABASE_URL": databaseURL]) { app in
            let cached = try await Self.subscribeAndCache(app)
            let fixture = try await Fixture.create(app.postgres)
            let (uncached, secret) = try await app.subscribe(topic: fixture.topic)
            _ = try await app.redis.send("DEL", app.keys.subscription(uncached))
            let bearer = [("Authorization", "Bearer \(secret)")]
            let base = "/api/push/v1/subscriptions/"

            relay.freeze()
            defer { relay.thaw() }
            let started = ContinuousClock.now
            /// Status and body, and how long the answer took; bounded so that a request
            /// held by the freeze fails the test instead of hanging it.
            @Sendable func answer(_ request: @escaping @Sendable () async throws -> RawHTTPClient.Response)
                async throws -> (status: Int, text: String, took: Duration)
            {
                let response = try await withTimeLimit(.seconds(20), request)
                return (response.status, response.text, ContinuousClock.now - started)
            }
            async let registration = answer { try await app.register(topic: fixture.topic) }
            async let update = answer {
                try await app.request("PUT", base + uncached, headers: bearer, body: Array(#"{"sandbox": true}"#.utf8))
            }
            async let pending = answer { try await app.request("GET", base + uncached + "/pending", headers: bearer) }
            async let activation = answer {
                try await app.request("POST", base + uncached + "/activate", headers: bearer)
            }
            async let deletion = answer { try await app.request("DELETE", base + uncached, headers: bearer) }
            async let uncachedPush = answer { try await app.push(uncached) }
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await app.push(cached).status == 201, "served from the cache while the rest wait")

            for (name, result) in [
                ("registration", try await registration), ("update", try await update),
                ("pending", try await pending), ("activation", try await activation),
                ("deletion", try await deletion), ("uncached push", try await uncachedPush),
            ] {
                #expect(result.status == 503, "\(name) answered \(result.status) \(result.text)")
                #expect(result.text == errorBody(1005, "Storage error"), "\(name)")
                #expect(result.took < .seconds(10), "\(name) took \(result.took)")
            }
        }
    }
}
