import Synchronization

/// An operation's time limit passed before it finished.
public struct TimeLimitExceeded: Error, CustomStringConvertible {
    public let limit: Duration
    public var description: String { "no answer within \(limit)" }
}

extension Task {
    /// The task's value, or `TimeLimitExceeded` once `limit` has passed first. The task
    /// is not cancelled: one blocked in a C call (a query to a frozen server) could not
    /// stop anyway, and finishes in its own time.
    public func value(waitingAtMost limit: Duration) async throws -> Success {
        let answered = Atomic<Bool>(false)
        return try await withCheckedThrowingContinuation { continuation in
            let answer = { @Sendable (result: Result<Success, any Error>) in
                guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return }
                continuation.resume(with: result)
            }
            let timer = Task<Void, Never> {
                guard (try? await Task<Never, Never>.sleep(for: limit)) != nil else { return }  // cancelled
                answer(.failure(TimeLimitExceeded(limit: limit)))
            }
            Task<Void, Never> {
                let result = await self.result
                timer.cancel()
                answer(result.mapError { $0 as any Error })
            }
        }
    }
}

/// Runs `operation` in a task of its own and returns its value, or throws
/// `TimeLimitExceeded` once `limit` has passed first; the operation goes on, and
/// finishes in its own time (`Task.value(waitingAtMost:)`).
public func withTimeLimit<Success: Sendable>(
    _ limit: Duration, _ operation: @escaping @Sendable () async throws -> Success
) async throws -> Success {
    try await Task(operation: operation).value(waitingAtMost: limit)
}
