import Shared

/// Maps what a route threw to the answer: a `PushAPIError` as it is; a value
/// Postgres cannot receive (a NUL in text: the request's fault) as 1001; Redis,
/// Postgres and pool failures as 1005 (503 when the store is unreachable or
/// overloaded, 500 otherwise). Never a 201.
enum StorageFailure {
    static func apiError(for error: any Error) -> PushAPIError {
        switch error {
        case let error as PushAPIError: error
        case let error as RedisError:
            switch error.code {
            case .unexpectedReply, .protocol: .storageFailed
            default: .storageUnavailable
            }
        case let error as PostgresError:
            switch error.code {
            case .invalidParameter: .invalid("a value holds a character that cannot be stored")
            case .connectionFailed, .connectionClosed: .storageUnavailable
            default: .storageFailed
            }
        case is ConnectionPoolError: .storageUnavailable
        default: .storageFailed
        }
    }

    /// Whether the error is the store's fault (worth a log line), not the client's.
    static func isStorageError(_ error: any Error) -> Bool { apiError(for: error).code == .storageError }

    /// Whether Postgres or Redis could not be reached (or their pools were exhausted):
    /// worth trying again later, unlike an error they answered with.
    static func isOutage(_ error: any Error) -> Bool {
        switch error {
        case let error as RedisError:
            switch error.code {
            case .connection, .timeout, .closed: true
            default: false
            }
        case let error as PostgresError: error.code == .connectionFailed || error.code == .connectionClosed
        case is ConnectionPoolError: true
        default: false
        }
    }
}
