import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// A send whose enqueue answer is lost after the script was sent may still have been
/// queued. The worker's outcome on the reply list then settles it: `sent`, not a
/// failure the backend would retry (and the user would see twice). The whole stack
/// runs on a Redis of its own, which the test holds busy with a long script while
/// the sender's command times out (1 s); Redis runs the queued command once the
/// long one ends.
@Suite struct AppAPILostAnswerTests {
    @Test func aMessageWhoseEnqueueAnswerWasLostIsReportedByItsOutcome() async throws {
        try await PrivateRedis.with { try await scenario($0) }
    }

    func scenario(_ server: PrivateRedis) async throws {
        try await DeliveryStack.with(ingress: ["REDIS_URL": server.url]) { stack in
            try await stack.startWorker(["REDIS_URL": server.url])
            let device = try await stack.device()
            // The sender alone (the route's per-app limit would meet the busy Redis first),
            // with a command timeout of 1 s.
            let redis = try RedisClient(
                url: RedisURL(server.url),
                options: .init(connection: .init(connectTimeout: .seconds(2), commandTimeout: .seconds(1))))
            defer { redis.close() }
            let sender = AppAPISender(
                repository: AppAPIRepository(postgres: stack.postgres), redis: redis, keys: stack.keys,
                cache: HotPathCache(
                    redis: redis, keys: stack.keys, subscriptions: SubscriptionRepository(postgres: stack.postgres),
                    directory: AppDirectory(postgres: stack.postgres), lifetimeMilliseconds: 60_000),
                replies: ReplyCollector(redis: redis, stopping: StopFlag()), maximumTTLSeconds: 3600,
                deadline: .seconds(10), metrics: IngressMetrics())
            let message = #"{"subscriptionId":"\#(device.id)","payload":"\#(DeliveryStack.payload)"}"#
            let batch = try SendBatch(json: Array(#"{"messages":[\#(message)]}"#.utf8))
            func send() async throws -> String {
                let response = try await sender.send(batch, app: stack.fixture.appID)
                let object = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
                let results = object?["results"] as? [[String: String]]
                return results?.first?["status"] ?? "no status: \(response.status)"
            }
            // Warm: the script is loaded, the cache entries are in place.
            #expect(try await send() == "sent")

            let blocker = try RedisClient(url: server.url)
            defer { blocker.close() }
            let busy = Task {
                try await blocker.send(
                    RedisCommand(
                        "EVAL",
                        """
                        local function now() local t = redis.call('TIME') return t[1] * 1000 + t[2] / 1000 end
                        local start = now()
                        while now() - start < 3000 do end
                        return 1
                        """, 0), timeout: .seconds(10))
            }
            // Redis is inside the long script once a PING gets no answer in 100 ms.
            let probe = try RedisClient(
                url: RedisURL(server.url),
                options: .init(connection: .init(connectTimeout: .seconds(2), commandTimeout: .milliseconds(100))))
            defer { probe.close() }
            let inScript = try await Poll.until(timeout: .seconds(3), interval: .milliseconds(20)) {
                (try? await probe.send("PING")) == nil
            }
            #expect(inScript)
            let start = ContinuousClock.now
            let status = try await send()
            _ = try await busy.value
            // Its command timed out (1 s) before the outcome came: the lost-answer path.
            #expect(ContinuousClock.now - start >= .seconds(1))
            #expect(status == "sent")
            #expect(stack.recordings(token: device.token).count == 2)
        }
    }
}
