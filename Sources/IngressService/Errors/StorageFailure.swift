import Shared

/// Maps what a route threw to the answer: a `PushAPIError` as it is; a value
/// Postgres cannot receive (a NUL in text: the request's fault) as 1001; Redis,
/// Postgres and pool failures as 1005: 503 for an outage (`isOutage`), 500 for an
/// error the store answered with. Never a 201.
enum StorageFailure {
    static func apiError(for error: any Error) -> PushAPIError {
        switch error {
        case let error as PushAPIError: error
        case let error as PostgresError where error.code == .invalidParameter:
            .invalid("a value holds a character that cannot be stored")
        default: isOutage(error) ? .storageUnavailable : .storageFailed
        }
    }

    /// Whether the error is the store's fault (worth a log line), not the client's.
    static func isStorageError(_ error: any Error) -> Bool { apiError(for: error).code == .storageError }

    /// Whether Postgres or Redis could not be reached or cannot serve for now (down,
    /// refusing our credentials, loading, read-only after a failover, out of memory,
    /// pools exhausted): worth trying again later, unlike an error answered to the
    /// request itself. The one table for the push API's 503 and the admin API's.
    static func isOutage(_ error: any Error) -> Bool {
        switch error {
        case let error as RedisError:
            switch error.code {
            case .connection, .timeout, .closed, .authentication, .database: true
            case .server(let prefix): transientRedisReplies.contains(prefix)
            case .protocol, .unexpectedReply, .invalidURL: false
            }
        case let error as PostgresError:
            error.code == .connectionFailed || error.code == .connectionClosed || error.isReadOnlyTransaction
        case is ConnectionPoolError: true
        case is PostgresNotAnswering: true  // the admin API's wait (`PostgresLiveness`)
        case is TimeLimitExceeded: true  // waited past a request's limit (`DeviceRoutes.storageWait`, …)
        default: false
        }
    }

    /// Error replies of a Redis that cannot serve for now, rather than refusing the command.
    private static let transientRedisReplies: Set<String> = [
        "LOADING", "READONLY", "BUSY", "OOM", "MASTERDOWN", "TRYAGAIN", "NOREPLICAS",
    ]
}
