import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Shared

/// The shared token store against the test Redis; each test uses its own credential id.
@Suite struct APNsRedisProviderTokenStoreTests {
    final class Clock: Sendable {
        let seconds = Mutex<TimeInterval>(1_700_000_000)
        func advance(minutes: Double) { seconds.withLock { $0 += minutes * 60 } }
        var now: Date { Date(timeIntervalSince1970: seconds.withLock { $0 }) }
    }

    let redis: RedisClient
    let credential: APNsCredential

    init() throws {
        redis = try RedisClient(url: TestEnvironment.redisURL)
        credential = APNsCredential(
            id: "test-\(UUID().uuidString)", teamID: "TEAM123456", keyID: "KEY1234567", privateKey: try .generate())
    }

    func store(_ clock: Clock) -> RedisProviderTokenStore {
        RedisProviderTokenStore(redis: redis, now: { clock.now })
    }

    @Test func workersShareOneTokenSignedOnceEvenWhenAskingAtOnce() async throws {
        let clock = Clock()
        let workers = (0..<3).map { _ in store(clock) }
        let credential = credential
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<30 {
                let worker = workers[index % 3]
                group.addTask { try await worker.token(for: credential) }
            }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens.count == 1)
        #expect(workers.map(\.signedCount).reduce(0, +) == 1)
        let stored = try await redis.send("GET", RedisProviderTokenStore.tokenKey(credential)).string
        #expect(stored.flatMap(RedisProviderTokenStore.decode)?.value == tokens.first)
        let ttl = try await redis.send("PTTL", RedisProviderTokenStore.tokenKey(credential)).int ?? 0
        #expect(ttl > 59 * 60 * 1000 && ttl <= 60 * 60 * 1000)
        _ = try await redis.send("DEL", RedisProviderTokenStore.tokenKey(credential))
    }

    @Test func fiftyMinutesOldIsResignedOnceForEveryWorker() async throws {
        let clock = Clock()
        let (a, b) = (store(clock), store(clock))
        let first = try await a.token(for: credential)
        #expect(try await b.token(for: credential) == first)
        clock.advance(minutes: 49)
        #expect(try await a.token(for: credential) == first)
        clock.advance(minutes: 1)
        let second = try await b.token(for: credential)
        #expect(second != first)
        #expect(try await a.token(for: credential) == second)
        #expect(a.signedCount + b.signedCount == 2)
        _ = try await redis.send("DEL", RedisProviderTokenStore.tokenKey(credential))
    }

    @Test func expiredProviderTokenRefreshesOnceButNeverWithinTwentyMinutes() async throws {
        let clock = Clock()
        let (a, b) = (store(clock), store(clock))
        let first = try await a.token(for: credential)
        clock.advance(minutes: 10)
        #expect(try await b.token(for: credential, replacing: .expired(first)) == first)
        clock.advance(minutes: 15)
        let second = try await b.token(for: credential, replacing: .expired(first))
        #expect(second != first)
        // The other worker saw the same rejection: it takes the new token, no second signature.
        #expect(try await a.token(for: credential, replacing: .expired(first)) == second)
        #expect(a.signedCount + b.signedCount == 2)
        _ = try await redis.send("DEL", RedisProviderTokenStore.tokenKey(credential))
    }

    @Test func anInvalidTokenIsReplacedAtOnceAndOnceForEveryWorker() async throws {
        let clock = Clock()
        let (a, b) = (store(clock), store(clock))
        let first = try await a.token(for: credential)
        clock.advance(minutes: 1)
        let second = try await b.token(for: credential, replacing: .invalid(first))
        #expect(second != first)
        #expect(try await a.token(for: credential, replacing: .invalid(first)) == second)
        #expect(a.signedCount + b.signedCount == 2)
        _ = try await redis.send("DEL", RedisProviderTokenStore.tokenKey(credential))
    }

    @Test func theLocalCopySparesRedisForAMinute() async throws {
        let clock = Clock()
        let worker = store(clock)
        let first = try await worker.token(for: credential)
        _ = try await redis.send("DEL", RedisProviderTokenStore.tokenKey(credential))
        clock.advance(minutes: 0.5)
        #expect(try await worker.token(for: credential) == first, "served from the process's copy")
        #expect(worker.signedCount == 1)
        clock.advance(minutes: 0.6)
        #expect(try await worker.token(for: credential) != first, "asked Redis again, found nothing, signed")
        #expect(worker.signedCount == 2)
        _ = try await redis.send("DEL", RedisProviderTokenStore.tokenKey(credential))
    }

    @Test func aLockHeldByAnotherWorkerIsWaitedFor() async throws {
        let clock = Clock()
        let worker = store(clock)
        // Timed from before the lock is set: on a busy machine this task may resume after
        // the lock lapsed, and the store then rightly signs at once.
        let started = ContinuousClock.now
        _ = try await redis.send("SET", RedisProviderTokenStore.lockKey(credential), "someone-else", "PX", 300)
        let token = try await worker.token(for: credential)
        #expect(ContinuousClock.now - started >= .milliseconds(200), "waited for the lock to lapse")
        #expect(try ES256JWT.verify(token, key: credential.privateKey.publicKey).claims.issuer == "TEAM123456")
        _ = try await redis.send("DEL", RedisProviderTokenStore.tokenKey(credential))
    }
}
