import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// Stops and restarts a Redis of its own (a private `redis-server` on a random
/// port, so the shared test Redis and other suites are not disturbed); named
/// Disruptive so `scripts/test` runs it apart from the rest anyway.
@Suite(.serialized) struct DisruptiveIngressRedisRestartTests {
    @Test func pushesFailWith5xxWhileRedisIsDownAndSucceedAfterWithTheCacheRebuilt() async throws {
        try await PrivateRedis.with { try await scenario($0) }
    }

    func scenario(_ redis: PrivateRedis) async throws {
        try await IngressTestApp.with(["REDIS_URL": redis.url]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)

            try await redis.stop()
            var statuses: [Int] = []
            for _ in 0..<5 { statuses.append(try await app.push(id).status) }
            let registration = try await app.register(topic: fixture.topic)
            let ready = try await app.request("GET", "/readyz")
            try await redis.start()

            #expect(statuses.allSatisfy { $0 == 503 }, "\(statuses)")
            #expect(registration.status == 503)
            #expect(registration.text == errorBody(1005, "Storage error"))
            #expect(ready.status == 503)

            // Redis is back, empty: the cache is rebuilt from Postgres and pushes are accepted again.
            var status = 0
            for _ in 0..<20 where status != 201 {
                status = try await app.push(id).status
                if status != 201 { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(status == 201)
            #expect(try await app.redis.send("EXISTS", app.keys.subscription(id)).int == 1)
            #expect(try await app.queueLength() == 1)
            // Readiness answers are reused for a second: asked until the one before ages.
            #expect(
                try await Poll.until(timeout: .seconds(5)) { try await app.request("GET", "/readyz").status == 200 })
        }
    }
}
