import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// The circuit flag against the real Redis.
@Suite struct CircuitBreakerTests {
    /// A success right after a failure that raised the flag: the flag's `SET` was
    /// handed off without waiting, and must still not land after the success's `DEL`
    /// (it would keep the ingress answering 502 for the flag's lifetime after APNs recovered).
    @Test func aSuccessRightAfterTheRaisingFailureLeavesNoFlag() async throws {
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer { redis.close() }
        let (logger, _) = TestEnvironment.capturingLogger("circuit")
        let keys = RedisKeys(stream: "pushgate-test:circuit:{c\(UInt64.random(in: 0...UInt64.max))}")
        let breaker = CircuitBreaker(redis: redis, threshold: 1, lifetimeSeconds: 30, logger: logger)
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
}
