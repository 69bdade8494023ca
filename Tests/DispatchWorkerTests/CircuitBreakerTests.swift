import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// The circuit flag against the real Redis.
@Suite struct CircuitBreakerTests {
    /// A breaker raising at the first failure, on keys of its own; its Redis client
    /// (the caller closes it) and its log.
    static func breaker() throws -> (RedisClient, CircuitBreaker, RedisKeys, CapturedLogLines) {
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        let (logger, logs) = TestEnvironment.capturingLogger("circuit")
        let keys = RedisKeys(stream: "pushgate-test:circuit:{c\(UInt64.random(in: 0...UInt64.max))}")
        return (redis, CircuitBreaker(redis: redis, threshold: 1, lifetimeSeconds: 30, logger: logger), keys, logs)
    }

    /// A success right after a failure that raised the flag: the flag's `SET` was
    /// handed off without waiting, and must still not land after the success's `DEL`
    /// (it would keep the ingress answering 502 for the flag's lifetime after APNs recovered).
    @Test func aSuccessRightAfterTheRaisingFailureLeavesNoFlag() async throws {
        let (redis, breaker, keys, _) = try Self.breaker()
        defer { redis.close() }
        let flag = keys.circuit(credential: "cred", environment: "production")
        for round in 0..<100 {
            breaker.failure(credential: "cred", environment: "production", keys: keys)
            await breaker.success(credential: "cred", environment: "production", keys: keys)
            #expect(try await redis.send("EXISTS", flag).int == 0, "round \(round)")
        }
        breaker.failure(credential: "cred", environment: "production", keys: keys)
        let raised = try await Poll.until(timeout: .seconds(5)) { try await redis.send("EXISTS", flag).int == 1 }
        #expect(raised)
        await breaker.success(credential: "cred", environment: "production", keys: keys)
        #expect(try await redis.send("EXISTS", flag).int == 0)
    }

    /// A flag this process raises just before its first success's inherited clear
    /// runs (a success that saw no failure counted, failures right after it) stays up:
    /// the clear is skipped for a flag this process holds.
    @Test func theInheritedClearLeavesAFlagThisProcessRaised() async throws {
        let (redis, breaker, keys, logs) = try Self.breaker()
        defer { redis.close() }
        let flag = keys.circuit(credential: "cred", environment: "production")
        breaker.failure(credential: "cred", environment: "production", keys: keys)
        breaker.clearInherited(credential: "cred", environment: "production", keys: keys)
        #expect(try await Poll.until(timeout: .seconds(5)) { try await redis.send("EXISTS", flag).int == 1 })
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await redis.send("EXISTS", flag).int == 1)
        #expect(!logs.all.contains { $0.contains("left by another process cleared") })
        _ = try await redis.send("DEL", flag)
    }

    /// A flag another process left up (a worker that raised it and was restarted) is
    /// cleared by this process's first success for that credential/environment, on the
    /// path that skips `success` as well; later successes do not write again.
    @Test func aFlagLeftByAnotherProcessIsClearedByTheFirstSuccess() async throws {
        let (redis, breaker, keys, logs) = try Self.breaker()
        defer { redis.close() }
        let flag = keys.circuit(credential: "cred", environment: "production")
        let other = keys.circuit(credential: "cred", environment: "sandbox")
        _ = try await redis.send("SET", flag, "1", "EX", 30)
        _ = try await redis.send("SET", other, "1", "EX", 30)
        #expect(!breaker.isTracking)
        breaker.clearInherited(credential: "cred", environment: "production", keys: keys)
        #expect(try await Poll.until(timeout: .seconds(5)) { try await redis.send("EXISTS", flag).int == 0 })
        #expect(try await redis.send("EXISTS", other).int == 1)
        #expect(
            try await Poll.until(timeout: .seconds(5)) {
                logs.all.contains { $0.contains("left by another process cleared") }
            })
        // Once per flag: a flag raised again by another process stays until its own success clears it.
        _ = try await redis.send("SET", flag, "1", "EX", 30)
        await breaker.success(credential: "cred", environment: "production", keys: keys)
        try await Task.sleep(for: .milliseconds(100))
        #expect(try await redis.send("EXISTS", flag).int == 1)
        await breaker.success(credential: "cred", environment: "sandbox", keys: keys)
        #expect(try await Poll.until(timeout: .seconds(5)) { try await redis.send("EXISTS", other).int == 0 })
        _ = try await redis.send("DEL", flag)
    }

    /// A stopping worker takes down the flag it holds and raises none again: the
    /// timeouts of its last sends would otherwise hold the ingress at 502 for the
    /// flag's lifetime while its peers deliver (probe 131). A flag it does not hold stays.
    @Test func aStoppingWorkerTakesDownItsFlagAndRaisesNoMore() async throws {
        let (redis, breaker, keys, logs) = try Self.breaker()
        defer { redis.close() }
        let flag = keys.circuit(credential: "cred", environment: "production")
        let peers = keys.circuit(credential: "cred", environment: "sandbox")
        _ = try await redis.send("SET", peers, "1", "EX", 30)
        breaker.failure(credential: "cred", environment: "production", keys: keys)
        #expect(try await Poll.until(timeout: .seconds(5)) { try await redis.send("EXISTS", flag).int == 1 })
        await breaker.stop()
        #expect(try await redis.send("EXISTS", flag).int == 0)
        #expect(!breaker.isRaised(credential: "cred", environment: "production", keys: keys))
        #expect(logs.all.contains { $0.contains("circuit flags this worker held are taken down") })
        for _ in 0..<5 { breaker.failure(credential: "cred", environment: "production", keys: keys) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await redis.send("EXISTS", flag).int == 0)
        #expect(!breaker.isRaised(credential: "cred", environment: "production", keys: keys))
        #expect(try await redis.send("EXISTS", peers).int == 1)
        _ = try await redis.send("DEL", peers)
    }
}
