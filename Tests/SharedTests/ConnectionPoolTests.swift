import Synchronization
import Testing

@testable import Shared

@Suite struct ConnectionPoolTests {
    final class Fake: PoolableConnection {
        let number: Int
        init(number: Int) { self.number = number }
        var isUsable: Bool { true }
        func close() {}
    }

    @Test func waiterRetriesAtOnceWhenAConcurrentConnectFails() async throws {
        let attempts = Atomic<Int>(0)
        let pool = ConnectionPool<Fake>(name: "test", maximumConnections: 1, acquireTimeout: .seconds(3)) {
            let attempt = attempts.add(1, ordering: .relaxed).newValue
            if attempt == 1 {
                try await Task.sleep(for: .milliseconds(200))
                throw CancellationError()  // stands for "connection refused"
            }
            return Fake(number: attempt)
        }
        defer { pool.close() }

        let failing = Task { try await pool.withConnection { $0.number } }
        try await Task.sleep(for: .milliseconds(50))  // the first task is connecting; this one must queue
        let started = ContinuousClock.now
        let second = try await pool.withConnection { $0.number }
        #expect(second == 2)
        #expect(ContinuousClock.now - started < .seconds(1))
        await #expect(throws: CancellationError.self) { try await failing.value }
        #expect(pool.openConnections == 1)
    }
}
