import Foundation
import TestSupport
import Testing

@testable import IngressService
@testable import Shared

@Suite struct RateLimitTests {
    @Test func registrationAllows20PerHourPerIPThen1006WithRetryAfter() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            for index in 1...20 {
                let response = try await app.register(topic: fixture.topic)
                try #require(response.status == 201, "registration \(index): \(response.status)")
            }
            let refused = try await app.register(topic: fixture.topic)
            #expect(refused.status == 429)
            #expect(refused.text == errorBody(1006, "Too many requests"))
            let retry = try #require(refused.headers["retry-after"].flatMap(Int.init))
            #expect(retry > 3500 && retry <= 3600)
            // Invalid requests count too, and do not reach validation.
            let invalid = try await app.request("POST", "/api/push/v1/subscriptions", body: Array("{".utf8))
            #expect(invalid.status == 429)
        }
    }

    @Test func otherDeviceEndpointsAllow120PerMinutePerIP() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            for index in 1...120 {
                let response = try await app.request(
                    "GET", "/api/push/v1/subscriptions/\(id)/pending", headers: [("Authorization", "Bearer \(secret)")])
                try #require(response.status == 200, "call \(index): \(response.status)")
            }
            let refused = try await app.request(
                "PUT", "/api/push/v1/subscriptions/\(id)", headers: [("Authorization", "Bearer \(secret)")],
                body: Array("{}".utf8))
            #expect(refused.status == 429)
            #expect(refused.text == errorBody(1006, "Too many requests"))
            #expect(refused.headers["retry-after"] != nil)
            // Registration has its own window.
            #expect(try await app.register(topic: fixture.topic).status == 201)
        }
    }

    /// A body over its limit is an attempt too: it uses a slot of its window (413 while
    /// under the limit), and once over it the answer is 429, so a client cannot send
    /// oversized bodies without limit.
    @Test func oversizedBodiesCountAgainstThePerIPLimits() async throws {
        try await IngressTestApp.with(["RATE_LIMIT_REGISTRATION": "2/3600", "RATE_LIMIT_DEVICE": "2/60"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let oversized = Array(repeating: UInt8(ascii: " "), count: IngressHandler.jsonBodyLimit + 1)
            let registrations = "/api/push/v1/subscriptions"
            for _ in 1...2 { #expect(try await app.request("POST", registrations, body: oversized).status == 413) }
            let refused = try await app.request("POST", registrations, body: oversized)
            #expect(refused.status == 429)
            #expect(refused.text == errorBody(1006, "Too many requests"))
            #expect(try await app.register(topic: fixture.topic).status == 429)

            let device = "/api/push/v1/subscriptions/\(String(repeating: "A", count: 22))"
            for _ in 1...2 { #expect(try await app.request("PUT", device, body: oversized).status == 413) }
            #expect(try await app.request("PUT", device, body: oversized).status == 429)
            #expect(try await app.request("DELETE", device).status == 429)
        }
    }

    /// A per-IP window holding more than its limit (a limit lowered by configuration
    /// while windows exist): the wait is until enough requests leave for one more,
    /// not only the oldest, so a client honouring Retry-After is not refused again.
    @Test func perIPRetryAfterWaitsForEnoughRequestsToLeaveTheWindow() async throws {
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer { redis.close() }
        let key = "pushgate-test:ip-window:\(UInt64.random(in: 0...UInt64.max))"
        let time = try await redis.send("TIME").array?.compactMap(\.string).compactMap(Int64.init) ?? []
        let now = time[0] * 1000 + time[1] / 1000
        // Four requests 50, 40, 30 and 20 s ago in a 60 s window; the limit is now 2.
        for (index, age) in [50, 40, 30, 20].enumerated() {
            _ = try await redis.send("ZADD", key, now - Int64(age) * 1000, "r\(index)")
        }
        let wait =
            try await redis.run(SlidingWindowLimiter.script, keys: [key], arguments: [2, 60_000, "new"]).int ?? 0
        // Three must leave (the one 30 s old last): about 30 s, not the oldest's 10 s.
        #expect((29_000...30_500).contains(wait), "\(wait)")
        _ = try await redis.send("DEL", key)
    }

    /// A burst that straddles a window boundary is still held to the limit over any
    /// window: 3 per 10 s, 3 at t≈0, one refused at t≈5.5 s, allowed again once the
    /// burst is 10 s old. The burst starts 2.5 s before a multiple of 10 s of Redis's
    /// clock, so a fixed window (restarting on those multiples) would allow the push
    /// at 5.5 s. The long window leaves seconds of margin for a loaded machine.
    @Test func windowIsSlidingNotFixed() async throws {
        try await IngressTestApp.with(["RATE_LIMIT_PUSH": "3/10"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let time = try await app.redis.send("TIME").array?.compactMap(\.string).compactMap(Int64.init) ?? []
            let intoWindow = (time[0] * 1000 + time[1] / 1000) % 10_000
            try await Task.sleep(for: .milliseconds((17_500 - intoWindow) % 10_000))
            let start = ContinuousClock.now
            for _ in 0..<3 { #expect(try await app.push(id).status == 201) }
            let burstEnd = ContinuousClock.now
            try await Task.sleep(until: max(burstEnd, start + .milliseconds(5500)))
            #expect(try await app.push(id).status == 429)
            try await Task.sleep(until: burstEnd + .milliseconds(10_300))
            #expect(try await app.push(id).status == 201)
        }
    }

    /// The window's list keeps old times until it holds twice the limit, then keeps
    /// the limit's newest: the limit still holds exactly before and after the cut.
    @Test func theWindowListIsCutAtTwiceTheLimitAndStaysExact() async throws {
        try await IngressTestApp.with(["RATE_LIMIT_PUSH": "2/2"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            func length() async throws -> Int64 { try await app.redis.send("LLEN", app.keys.pushRate(id)).int ?? -1 }
            for round in 1...3 {
                for _ in 0..<2 { #expect(try await app.push(id).status == 201, "round \(round)") }
                let refused = try await app.push(id)
                #expect(refused.status == 429, "round \(round)")
                #expect(refused.headers["retry-after"].flatMap(Int.init).map { (1...2).contains($0) } == true)
                // 2, 4, then 5 cut to 2 and one more: 3.
                #expect(try await length() == [2, 4, 3][round - 1])
                try await Task.sleep(for: .milliseconds(2300))
            }
            let ttl = try await app.redis.send("PTTL", app.keys.pushRate(id)).int ?? 0
            #expect(ttl > 0 && ttl <= 4000)
        }
    }

    /// The window's list gets its lifetime (twice the window) when it is new, and again
    /// whenever less than a window of it is left, which the subscription's cache entry
    /// records (`rexp`, the list's expiry) so that a push need not ask the list. A list
    /// deleted behind the mark, or a mark gone with a refilled entry, still ends with a
    /// list that outlives its newest push by a window.
    @Test func theWindowListAlwaysOutlivesItsNewestPushByAWindow() async throws {
        try await IngressTestApp.with(["RATE_LIMIT_PUSH": "100/20"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let list = app.keys.pushRate(id)
            let entry = app.keys.subscription(id)
            func expiry() async throws -> Int64 { try await app.redis.send("PEXPIRETIME", list).int ?? 0 }
            func mark() async throws -> Int64? {
                try await app.redis.send("HGET", entry, SubscriptionCacheField.rateWindowExpiry).int
            }
            func now() async throws -> Int64 {
                let time = try await app.redis.send("TIME").array ?? []
                return (time.first?.int ?? 0) * 1000 + (time.last?.int ?? 0) / 1000
            }
            func expectLifetimeOfTwoWindows(_ comment: Comment) async throws {
                let left = try await expiry() - now()
                #expect(left > 35_000 && left <= 40_000, comment)
            }

            #expect(try await app.push(id).status == 201)
            try await expectLifetimeOfTwoWindows("a new list")
            #expect(try await mark() == nil)
            #expect(try await app.push(id).status == 201)
            let renewed = try #require(try await mark(), "no mark before the second push: renewed")
            #expect(try await expiry() == renewed)
            #expect(try await app.push(id).status == 201)
            #expect(try await mark() == renewed, "more than a window left: not renewed")

            // As if time had passed: less than a window left.
            let soon = try await now() + 10_000
            _ = try await app.redis.send("PEXPIREAT", list, soon)
            _ = try await app.redis.send("HSET", entry, SubscriptionCacheField.rateWindowExpiry, soon)
            #expect(try await app.push(id).status == 201)
            try await expectLifetimeOfTwoWindows("less than a window left")
            #expect(try await mark() == expiry())

            _ = try await app.redis.send("DEL", list)
            #expect(try await app.push(id).status == 201)
            try await expectLifetimeOfTwoWindows("a list deleted behind the mark")
            #expect(try await app.redis.send("LLEN", list).int == 1)

            _ = try await app.redis.send("PEXPIREAT", list, soon)
            _ = try await app.redis.send("HDEL", entry, SubscriptionCacheField.rateWindowExpiry)
            #expect(try await app.push(id).status == 201)
            try await expectLifetimeOfTwoWindows("no mark")
            #expect(try await mark() == expiry())
        }
    }

    /// Pushes sent at once are mostly decided in one script run: each still as if alone,
    /// so the window admits exactly the limit, refused pushes leave no time behind, and
    /// the quota counts exactly the accepted ones (a key created with its lifetime).
    @Test func aBurstKeepsTheWindowExactAndCountsTheQuotaOfTheAcceptedOnly() async throws {
        try await IngressTestApp.with(["RATE_LIMIT_PUSH": "3/60"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 { group.addTask { try await app.push(id).status } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.sorted() == [201, 201, 201, 429, 429, 429, 429, 429])
            #expect(try await app.redis.send("LLEN", app.keys.pushRate(id)).int == 3)
            let quota = app.keys.quota(account: fixture.accountID, month: RedisKeys.quotaMonth())
            #expect(try await app.redis.send("GET", quota).int == 3)
            #expect(try await app.redis.send("TTL", quota).int.map { $0 > 0 } == true)
        }
    }

    @Test func clientIPComesFromTrustedProxiesRightMostUntrustedHop() {
        func head(peer: [UInt8], forwarded: [String]) -> HTTPRequestHead {
            HTTPRequestHead(
                method: "GET", path: "/", query: [], headers: HTTPHeaders(forwarded.map { ("X-Forwarded-For", $0) }),
                peerAddress: peer)
        }
        let resolver = ClientIPResolver(trustedProxies: [CIDR("10.0.0.0/8")!, CIDR("fd00::/8")!])
        let proxy: [UInt8] = [10, 1, 2, 3]
        #expect(resolver.clientKey(head(peer: [192, 0, 2, 1], forwarded: ["198.51.100.7"])) == "192.0.2.1")
        #expect(resolver.clientKey(head(peer: proxy, forwarded: ["198.51.100.7"])) == "198.51.100.7")
        #expect(resolver.clientKey(head(peer: proxy, forwarded: ["6.6.6.6, 198.51.100.7, 10.9.9.9"])) == "198.51.100.7")
        #expect(resolver.clientKey(head(peer: proxy, forwarded: ["6.6.6.6", "198.51.100.7:4711"])) == "198.51.100.7")
        #expect(resolver.clientKey(head(peer: proxy, forwarded: [])) == "10.1.2.3")
        #expect(resolver.clientKey(head(peer: proxy, forwarded: ["garbage"])) == "10.1.2.3")
        let v6 = CIDR.parseAddress("2001:db8:1:2:3:4:5:6")!
        #expect(resolver.clientKey(head(peer: v6, forwarded: [])) == "2001:db8:1:2::/64")
        let mapped = CIDR.parseAddress("::ffff:10.0.0.1")!
        #expect(resolver.clientKey(head(peer: mapped, forwarded: ["203.0.113.9"])) == "203.0.113.9")
        let untrusting = ClientIPResolver(trustedProxies: [])
        #expect(untrusting.clientKey(head(peer: proxy, forwarded: ["198.51.100.7"])) == "10.1.2.3")
    }

    /// Pushes to push URLs neither Redis nor Postgres knows cost a Postgres read each:
    /// per client IP, past `RATE_LIMIT_UNKNOWN_PUSH` such lookups are refused (429)
    /// before Postgres is asked. What Redis answers (a known subscription, an id found
    /// unknown a moment ago) is not held up, nor are other clients.
    @Test func pushesToUnknownURLsAreLimitedPerClientIP() async throws {
        try await IngressTestApp.with(["TRUSTED_PROXIES": "127.0.0.0/8", "RATE_LIMIT_UNKNOWN_PUSH": "3/60"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (known, _) = try await app.subscribe(topic: fixture.topic)
            let prober = [("X-Forwarded-For", "198.51.100.1")]
            func push(_ id: String, from client: [(String, String)]) async throws -> RawHTTPClient.Response {
                try await app.push(id, headers: Fixture.pushHeaders + client)
            }
            #expect(try await push(known, from: prober).status == 201)  // now in Redis's cache
            let unknown = (0..<4).map { _ in Base64URL.encode(SecureRandom.bytes(16)) }
            for id in unknown.prefix(3) { #expect(try await push(id, from: prober).status == 404) }
            let refused = try await push(unknown[3], from: prober)
            #expect(refused.status == 429)
            #expect(refused.text == errorBody(1006, "Too many requests"))
            #expect(Int(refused.headers["retry-after"] ?? "") ?? 0 > 0)
            // Redis's answers still come: an id found unknown a moment ago, a known subscription.
            #expect(try await push(unknown[0], from: prober).status == 404)
            #expect(try await push(known, from: prober).status == 201)
            // Another client is not held up, and a subscription Redis had to look up is not counted.
            let other = [("X-Forwarded-For", "198.51.100.2")]
            #expect(try await push(unknown[3], from: other).status == 404)
            for _ in 0..<4 {
                _ = try await app.redis.send("DEL", app.keys.subscription(known))
                #expect(try await push(known, from: other).status == 201)
            }
        }
    }

    /// A server whose address used up its unknown-push lookups (pushing to many stale
    /// URLs) still reaches a device registered now: registration caches the new
    /// subscription, so the verification push right after it needs no lookup; so do
    /// activation and a PUT, and a PUT that changes nothing cached leaves the entry be;
    /// after a DELETE the sender learns the URL is gone.
    @Test func aNewSubscriptionIsReachableFromAnAddressPastItsUnknownPushLimit() async throws {
        try await IngressTestApp.with(["TRUSTED_PROXIES": "127.0.0.0/8", "RATE_LIMIT_UNKNOWN_PUSH": "3/60"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let server = Fixture.pushHeaders + [("X-Forwarded-For", "198.51.100.3")]
            for _ in 0..<3 {
                #expect(try await app.push(Base64URL.encode(SecureRandom.bytes(16)), headers: server).status == 404)
            }
            #expect(try await app.push(Base64URL.encode(SecureRandom.bytes(16)), headers: server).status == 429)

            let (pending, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            let verification = try await app.push(pending, headers: server)
            #expect(verification.status == 201, "\(verification.text)")
            let stashed = try await app.request(
                "GET", "/api/push/v1/subscriptions/\(pending)/pending", headers: [("Authorization", "Bearer \(secret)")]
            )
            #expect(stashed.text.contains("messages") && stashed.text != #"{"messages":[]}"#)

            let bearer = [("Authorization", "Bearer \(secret)")]
            let path = "/api/push/v1/subscriptions/\(pending)"
            #expect(try await app.request("POST", path + "/activate", headers: bearer).status == 204)
            #expect(try await app.push(pending, headers: server).status == 201)
            #expect(try await app.request("PUT", path, headers: bearer, body: Array("{}".utf8)).status == 204)
            #expect(try await app.push(pending, headers: server).status == 201)
            let newToken = Fixture.token()
            let update = Array(#"{"token": "\#(newToken)"}"#.utf8)
            #expect(try await app.request("PUT", path, headers: bearer, body: update).status == 204)
            #expect(try await app.push(pending, headers: server).status == 201)
            #expect(try await app.queueEntries().last?.deviceToken == newToken)
            // Deleted by its device: the sender is told so (404), not held off (429).
            #expect(try await app.request("DELETE", path, headers: bearer).status == 204)
            #expect(try await app.push(pending, headers: server).status == 404)
        }
    }

    /// A lookup counts from its start: a burst of concurrent pushes to made-up URLs
    /// cannot all pass an empty window before the first ones are counted.
    @Test func aConcurrentBurstOfUnknownPushesIsHeldToTheLimit() async throws {
        try await IngressTestApp.with(["RATE_LIMIT_UNKNOWN_PUSH": "3/60"]) { app in
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await app.push(Base64URL.encode(SecureRandom.bytes(16))).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 404 }.count == 3)
            #expect(statuses.filter { $0 == 429 }.count == 17)
        }
    }

    @Test func trustedProxiesApplyToTheRunningService() async throws {
        try await IngressTestApp.with(["TRUSTED_PROXIES": "127.0.0.0/8", "RATE_LIMIT_REGISTRATION": "1/3600"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let body = Array(#"{"topic": "\#(fixture.topic)", "token": "\#(Fixture.token())", "sandbox": false}"#.utf8)
            for client in ["198.51.100.1", "198.51.100.2"] {
                let response = try await app.request(
                    "POST", "/api/push/v1/subscriptions", headers: [("X-Forwarded-For", client)], body: body)
                #expect(response.status == 201)
            }
            let again = try await app.request(
                "POST", "/api/push/v1/subscriptions", headers: [("X-Forwarded-For", "198.51.100.1")], body: body)
            #expect(again.status == 429)
        }
    }
}
