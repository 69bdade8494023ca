import Synchronization
import Testing

@testable import Shared

/// The pool's own mechanics, with a connection type that only counts. The real
/// Postgres and Redis pools are exercised against real servers in their suites.
@Suite struct ConnectionPoolTests {
    final class CountingConnection: PoolableConnection {
        let id: Int
        let usable = Atomic<Bool>(true)
        let closes = Atomic<Int>(0)
        init(id: Int) { self.id = id }
        var isUsable: Bool { usable.load(ordering: .relaxed) }
        func close() { closes.add(1, ordering: .relaxed) }
    }

    final class Factory: Sendable {
        let created = Mutex<[CountingConnection]>([])
        func make() -> CountingConnection {
            created.withLock { list in
                let connection = CountingConnection(id: list.count)
                list.append(connection)
                return connection
            }
        }
        var all: [CountingConnection] { created.withLock { $0 } }
    }

    /// How many leases are held at once, and the most ever held.
    final class LeaseCounters: Sendable {
        private let state = Mutex((current: 0, peak: 0))
        func enter() {
            state.withLock {
                $0.current += 1
                $0.peak = max($0.peak, $0.current)
            }
        }
        func leave() { state.withLock { $0.current -= 1 } }
        var peak: Int { state.withLock { $0.peak } }
    }

    @Test func reusesOneConnectionForSequentialLeases() async throws {
        let factory = Factory()
        let pool = ConnectionPool(name: "test", maximumConnections: 4, acquireTimeout: .seconds(1)) { factory.make() }
        for _ in 0..<10 {
            _ = try await pool.withConnection { $0.id }
        }
        #expect(factory.all.count == 1)
        #expect(pool.openConnections == 1)
    }

    @Test func neverOpensMoreThanTheMaximumUnderContention() async throws {
        let factory = Factory()
        let pool = ConnectionPool(name: "test", maximumConnections: 3, acquireTimeout: .seconds(60)) { factory.make() }
        let counters = LeaseCounters()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<40 {
                group.addTask {
                    try await pool.withConnection { _ in
                        counters.enter()
                        try await Task.sleep(for: .milliseconds(2))
                        counters.leave()
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(factory.all.count == 3)
        #expect(counters.peak == 3)
        #expect(pool.openConnections == 3)
    }

    @Test func acquireTimesOutWithATypedErrorWhenExhausted() async throws {
        let factory = Factory()
        let pool = ConnectionPool(name: "test", maximumConnections: 1, acquireTimeout: .milliseconds(100)) {
            factory.make()
        }
        let holding = AsyncStream<Void>.makeStream()
        let release = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await pool.withConnection { _ in
                holding.continuation.yield()
                for await _ in release.stream { break }
            }
        }
        for await _ in holding.stream { break }
        await #expect(throws: ConnectionPoolError(code: .acquireTimeout, poolName: "test")) {
            try await pool.withConnection { _ in }
        }
        release.continuation.yield()
        try await holder.value
        // The slot is free again after the timeout: the next lease works.
        try await pool.withConnection { _ in }
        #expect(factory.all.count == 1)
    }

    @Test func unusableConnectionIsClosedAndReplacedOnNextLease() async throws {
        let factory = Factory()
        let pool = ConnectionPool(name: "test", maximumConnections: 2, acquireTimeout: .seconds(1)) { factory.make() }
        let first = try await pool.withConnection { $0 }
        first.usable.store(false, ordering: .relaxed)  // e.g. the server closed it while idle
        let second = try await pool.withConnection { $0 }
        #expect(second.id == 1)
        #expect(first.closes.load(ordering: .relaxed) == 1)
        #expect(pool.openConnections == 1)
    }

    @Test func waiterGetsAFreshConnectionWhenTheReturnedOneIsBroken() async throws {
        let factory = Factory()
        let pool = ConnectionPool(name: "test", maximumConnections: 1, acquireTimeout: .seconds(2)) { factory.make() }
        let holding = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await pool.withConnection { connection in
                holding.continuation.yield()
                try await Task.sleep(for: .milliseconds(50))
                connection.usable.store(false, ordering: .relaxed)
            }
        }
        for await _ in holding.stream { break }
        let waiterGot = try await pool.withConnection { $0.id }
        try await holder.value
        #expect(waiterGot == 1)
        #expect(factory.all[0].closes.load(ordering: .relaxed) == 1)
        #expect(pool.openConnections == 1)
    }

    @Test func failedCreationFreesTheSlot() async throws {
        struct ConnectRefused: Error {}
        let factory = Factory()
        let pool = ConnectionPool(name: "test", maximumConnections: 1, acquireTimeout: .seconds(1)) {
            let connection = factory.make()
            if connection.id == 0 { throw ConnectRefused() }
            return connection
        }
        await #expect(throws: ConnectRefused.self) { try await pool.withConnection { _ in } }
        #expect(try await pool.withConnection { $0.id } == 1)
    }

    @Test func closedPoolRefusesLeasesAndClosesIdleConnections() async throws {
        let factory = Factory()
        let pool = ConnectionPool(name: "test", maximumConnections: 2, acquireTimeout: .seconds(1)) { factory.make() }
        try await pool.withConnection { _ in }
        pool.close()
        #expect(factory.all[0].closes.load(ordering: .relaxed) == 1)
        await #expect(throws: ConnectionPoolError(code: .closed, poolName: "test")) {
            try await pool.withConnection { _ in }
        }
    }

    @Test func waiterIsWokenToConnectWhenAnotherTasksConnectAttemptFails() async throws {
        struct ConnectFailed: Error {}
        let factory = Factory()
        let pool = ConnectionPool(name: "test", maximumConnections: 1, acquireTimeout: .seconds(10)) {
            let connection = factory.make()
            if connection.id == 0 {
                try await Task.sleep(for: .milliseconds(300))
                throw ConnectFailed()
            }
            return connection
        }
        // The first caller takes the only slot and its connect attempt fails slowly.
        let failing = Task { try await pool.withConnection { _ in 1 } }
        try await Task.sleep(for: .milliseconds(100))
        // The second caller waits for the slot; it must get it when the attempt
        // fails, well before the 10-second acquire timeout.
        let start = ContinuousClock.now
        let value = try await pool.withConnection { _ in 2 }
        #expect(value == 2)
        #expect(ContinuousClock.now - start < .seconds(5))
        await #expect(throws: ConnectFailed.self) { try await failing.value }
        #expect(factory.all.count == 2)
        #expect(pool.openConnections == 1)
        pool.close()
    }
}
