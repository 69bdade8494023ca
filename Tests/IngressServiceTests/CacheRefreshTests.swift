import Foundation
import TestSupport
import Testing

@testable import IngressService
@testable import Shared

/// How the hot-path script and the ingress refresh cache entries past their freshness.
@Suite struct CacheRefreshTests {
    /// When an entry ages, one push claims its refresh and the others go on with it
    /// meanwhile: a run of pushes to one app makes one Postgres read of the app's
    /// entry, not one each.
    @Test func anAgedEntryIsRefreshedByOnePushWhileTheOthersUseIt() async throws {
        try await IngressTestApp.with(["CACHE_TTL_SECONDS": "60"]) { app in
            let fixture = try await Fixture.create(app.postgres, plan: "enterprise")
            var ids: [String] = []
            for _ in 0..<3 {
                let (id, _) = try await app.subscribe(topic: fixture.topic)
                #expect(try await app.push(id).status == 201)
                ids.append(id)
            }
            let appKey = app.keys.app(fixture.appID)
            // As if the app's entry had aged.
            _ = try await app.redis.send("HSET", appKey, AppCacheField.fresh, "1")
            let requests = ids.enumerated().map { index, id in
                HotPathScript.Request(
                    subscriptionID: id, scope: .push, rateLimit: 120, rateWindowMilliseconds: 60_000, stashLimit: 5,
                    stashLifetimeMilliseconds: 1_800_000, quotaMonth: RedisKeys.quotaMonth(),
                    messageID: "message\(index)", ciphertext: [UInt8(index)], priority: 10, expiration: 0,
                    collapseID: nil, acceptedAt: 1)
            }
            let arguments: [any RedisValueConvertible] =
                [app.keys.prefix, 120, 60_000, 5, 1_800_000, RedisKeys.quotaMonth(), 86_400, "0"]
                + requests.flatMap { [$0.mode, $0.subscriptionID, $0.messagePart] as [any RedisValueConvertible] }
            let reply = try await app.redis.run(HotPathScript.script, keys: [app.keys.stream], arguments: arguments)
            let decisions = try (reply.array ?? []).map(HotPathScript.decision(from:))
            #expect(decisions.count == 3)
            #expect(decisions.first == .cacheMiss(kind: "app", id: fixture.appID, stale: true), "the first claims it")
            let queued = decisions.dropFirst().allSatisfy { if case .queued = $0 { true } else { false } }
            #expect(queued, "the others go on with the aged entry: \(decisions)")
            let lease = try await app.redis.send("HGET", appKey, AppCacheField.fresh).string.flatMap { Int64($0) } ?? 0
            #expect(lease > 1, "claimed: its freshness moved to the lease's end")

            // The claimer's push (through the ingress) refreshes it: fresh for the cache lifetime.
            _ = try await app.redis.send("HSET", appKey, AppCacheField.fresh, "1")
            #expect(try await app.push(ids[0]).status == 201)
            let fresh = try await app.redis.send("HGET", appKey, AppCacheField.fresh).string.flatMap { Int64($0) } ?? 0
            #expect(fresh > lease + 50_000, "filled again: fresh for about a minute, not a 5 s lease")
        }
    }
}
