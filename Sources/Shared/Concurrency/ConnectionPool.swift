import Synchronization

/// A connection the pool can lease out.
public protocol PoolableConnection: AnyObject, Sendable {
    /// Whether the connection can serve another lease. Called by the pool when a
    /// connection is returned and before an idle one is handed out, so it must be
    /// cheap and must not block (e.g. a zero-timeout `poll` that notices the peer
    /// closed the socket while the connection sat idle).
    var isUsable: Bool { get }
    /// Releases the underlying handle. Called exactly once by the pool.
    func close()
}

public struct ConnectionPoolError: Error, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// No connection became free within the acquire timeout.
        case acquireTimeout
        /// The pool was shut down.
        case closed
    }

    public let code: Code
    public let poolName: String

    public var description: String {
        switch code {
        case .acquireTimeout: "\(poolName) pool: timed out waiting for a free connection"
        case .closed: "\(poolName) pool: closed"
        }
    }
}

/// A bounded pool of connections shared by many tasks.
///
/// Connections are opened lazily up to `maximumConnections`. A task that finds
/// none free waits (FIFO) up to `acquireTimeout`, then gets
/// `ConnectionPoolError.acquireTimeout`. A connection that is no longer usable
/// when returned or when taken from the idle list is closed and replaced, so a
/// connection the server dropped is never handed out twice.
public final class ConnectionPool<Connection: PoolableConnection>: Sendable {
    public typealias Factory = @Sendable () async throws -> Connection

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Connection?, any Error>
    }

    private struct State {
        var idle: [Connection] = []
        var open = 0
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0
        /// Waiters that have an id but were not yet served or failed.
        var registered: Set<UInt64> = []
        /// Registered waiters that timed out or were cancelled before they were enqueued.
        var abandoned: [UInt64: any Error] = [:]
        var closed = false
    }

    /// What `acquire` decided to do while holding the lock.
    private enum AcquirePlan {
        case use(Connection)
        case create
        case discardThenRetry(Connection)
    }

    public let name: String
    public let maximumConnections: Int
    public let acquireTimeout: Duration
    private let factory: Factory
    private let state = Mutex(State())

    public init(name: String, maximumConnections: Int, acquireTimeout: Duration, factory: @escaping Factory) {
        precondition(maximumConnections > 0, "a pool needs at least one connection")
        self.name = name
        self.maximumConnections = maximumConnections
        self.acquireTimeout = acquireTimeout
        self.factory = factory
    }

    /// Leases a connection for the duration of `body`.
    public func withConnection<Result: Sendable>(
        _ body: (Connection) async throws -> Result
    ) async throws -> Result {
        let connection = try await acquire()
        do {
            let result = try await body(connection)
            release(connection)
            return result
        } catch {
            release(connection)
            throw error
        }
    }

    /// Number of connections currently open (leased or idle).
    public var openConnections: Int { state.withLock { $0.open } }

    /// Closes idle connections and fails waiters; leased connections are closed when returned.
    public func close() {
        let (idle, waiters) = state.withLock { state -> ([Connection], [Waiter]) in
            state.closed = true
            let idle = state.idle
            let waiters = state.waiters
            state.waiters.forEach { state.registered.remove($0.id) }
            state.idle.removeAll()
            state.waiters.removeAll()
            state.open -= idle.count
            return (idle, waiters)
        }
        idle.forEach { $0.close() }
        waiters.forEach { $0.continuation.resume(throwing: ConnectionPoolError(code: .closed, poolName: name)) }
    }

    private func acquire() async throws -> Connection {
        while true {
            let plan = try state.withLock { state -> AcquirePlan? in
                if state.closed { throw ConnectionPoolError(code: .closed, poolName: name) }
                if let connection = state.idle.popLast() {
                    if connection.isUsable { return .use(connection) }
                    state.open -= 1
                    return .discardThenRetry(connection)
                }
                if state.open < maximumConnections {
                    state.open += 1
                    return .create
                }
                return nil
            }
            switch plan {
            case .use(let connection):
                return connection
            case .discardThenRetry(let connection):
                connection.close()
                continue
            case .create:
                do {
                    return try await factory()
                } catch {
                    // The slot is free again: a task that queued up while this one was
                    // connecting must retry now, not sleep until its acquire timeout.
                    let waiter = state.withLock { state -> Waiter? in
                        state.open -= 1
                        guard !state.waiters.isEmpty else { return nil }
                        let waiter = state.waiters.removeFirst()
                        state.registered.remove(waiter.id)
                        return waiter
                    }
                    waiter?.continuation.resume(returning: nil)
                    throw error
                }
            case nil:
                // Woken with a connection, or with nil when a slot opened up (a
                // broken connection was discarded) and we should create one.
                if let connection = try await waitForRelease() { return connection }
            }
        }
    }

    private func waitForRelease() async throws -> Connection? {
        let id = state.withLock { state -> UInt64 in
            state.nextWaiterID += 1
            state.registered.insert(state.nextWaiterID)
            return state.nextWaiterID
        }
        let timeout = Task { [acquireTimeout] in
            try await Task.sleep(for: acquireTimeout)
            self.failWaiter(id, with: ConnectionPoolError(code: .acquireTimeout, poolName: self.name))
        }
        defer { timeout.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let refusal = state.withLock { state -> (any Error)? in
                    if state.closed {
                        state.registered.remove(id)
                        return ConnectionPoolError(code: .closed, poolName: name)
                    }
                    if let error = state.abandoned.removeValue(forKey: id) {
                        state.registered.remove(id)
                        return error
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let refusal { continuation.resume(throwing: refusal) }
            }
        } onCancel: {
            self.failWaiter(id, with: CancellationError())
        }
    }

    private func failWaiter(_ id: UInt64, with error: any Error) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else {
                // Not enqueued yet: leave word so it gives up as soon as it would be.
                if state.registered.contains(id) { state.abandoned[id] = error }
                return nil
            }
            state.registered.remove(id)
            return state.waiters.remove(at: index)
        }
        waiter?.continuation.resume(throwing: error)
    }

    private func release(_ connection: Connection) {
        let usable = connection.isUsable
        let (waiter, discard) = state.withLock { state -> (Waiter?, Bool) in
            let waiter = state.waiters.isEmpty ? nil : state.waiters.removeFirst()
            if let waiter { state.registered.remove(waiter.id) }
            if usable && !state.closed {
                if waiter == nil { state.idle.append(connection) }
                return (waiter, false)
            }
            state.open -= 1
            return (waiter, true)
        }
        if discard { connection.close() }
        // A discarded connection frees a slot: the waiter retries and opens a new one.
        waiter?.continuation.resume(returning: discard ? nil : connection)
    }
}
