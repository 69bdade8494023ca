import Synchronization
import Testing

@testable import Shared

@Suite struct ConnectionPoolTests {
    final class FakeConnection: PoolableConnection {
        var isUsable: Bool { true }
        func close() {}
    }

    struct ConnectFailed: Error {}

    @Test func waiterIsWokenToConnectWhenAnotherTasksConnectAttemptFails() async throws {
        let attempts = Mutex(0)
        let pool = ConnectionPool<FakeConnection>(
            name: "fake", maximumConnections: 1, acquireTimeout: .seconds(3)
        ) {
            let attempt = attempts.withLock { $0 += 1; return $0 }
            if attempt == 1 {
                try await Task.sleep(for: .milliseconds(300))
                throw ConnectFailed()
            }
            return FakeConnection()
        }
        // The first caller takes the only slot and its connect attempt fails slowly.
        let failing = Task { try await pool.withConnection { _ in 1 } }
        try await Task.sleep(for: .milliseconds(100))
        // The second caller waits for the slot; it must get it when the attempt fails,
        // not sit until the acquire timeout.
        let start = ContinuousClock.now
        let value = try await pool.withConnection { _ in 2 }
        #expect(value == 2)
        #expect(ContinuousClock.now - start < .seconds(1))
        await #expect(throws: ConnectFailed.self) { try await failing.value }
        #expect(attempts.withLock { $0 } == 2)
        #expect(pool.openConnections == 1)
        pool.close()
    }
}
