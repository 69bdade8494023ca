import CMicroHTTPD
import Synchronization

/// The connections suspended while their handlers work. A stop hands each one back
/// to libmicrohttpd first, with the handler's `unavailable` answer: libmicrohttpd
/// aborts the process when stopped with a connection still suspended, and a
/// handler answering after the stop must not resume a connection the stop freed.
/// Suspending, resuming and the stop's release all happen under one lock.
final class SuspendedConnections: Sendable {
    /// Raw pointers are not Sendable; they are used only under the lock.
    private struct State: @unchecked Sendable {
        var stopping = false
        var waiting: [OpaquePointer: HTTPRequestContext] = [:]
    }
    private let state = Mutex(State())

    /// Suspends `connection` for its handler. False once the server is stopping:
    /// the caller then answers at once instead.
    func suspend(_ connection: OpaquePointer, context: HTTPRequestContext) -> Bool {
        state.withLock { state in
            guard !state.stopping else { return false }
            state.waiting[connection] = context
            MHD_suspend_connection(connection)
            return true
        }
    }

    /// Resumes `connection` with the response its context now holds. False when the
    /// stop already released it (the answer came too late to be sent).
    func resume(_ connection: OpaquePointer) -> Bool {
        state.withLock { state in
            guard !state.stopping, state.waiting.removeValue(forKey: connection) != nil else { return false }
            MHD_resume_connection(connection)
            return true
        }
    }

    /// Refuses further suspensions and resumes every waiting connection with
    /// `response`, so the daemon can be stopped. Returns how many were waiting.
    @discardableResult
    func releaseAll(answering response: (HTTPRequestHead) -> HTTPResponse) -> Int {
        state.withLock { state in
            state.stopping = true
            for (connection, context) in state.waiting {
                context.response.withLock { $0 = response(context.head) }
                MHD_resume_connection(connection)
            }
            defer { state.waiting = [:] }
            return state.waiting.count
        }
    }

    var isStopping: Bool { state.withLock { $0.stopping } }
}
