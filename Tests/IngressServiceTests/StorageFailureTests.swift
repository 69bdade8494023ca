import Shared
import Testing

@testable import IngressService

/// What a route's error answers.
@Suite struct StorageFailureTests {
    /// A value Postgres cannot receive (a NUL in text) is the request's fault: 1001,
    /// not a storage error to log and answer 503.
    @Test func aValuePostgresCannotReceiveIsInvalidNotAStorageError() {
        let nul = PostgresError(code: .invalidParameter, message: "a NUL in text")
        #expect(StorageFailure.apiError(for: nul).code == .invalidParameters)
        #expect(StorageFailure.apiError(for: nul).status == 400)
        #expect(!StorageFailure.isStorageError(nul))
        let gone = PostgresError(code: .connectionFailed, message: "refused")
        #expect(StorageFailure.apiError(for: gone) == .storageUnavailable)
        #expect(StorageFailure.isStorageError(gone))
        #expect(!StorageFailure.isStorageError(PushAPIError.notFound))
    }

    /// One table decides 503 (an outage: try again later) for the push API and the
    /// admin API alike: a store that cannot serve for now, not an error answered to
    /// the request (500).
    @Test func outagesAre503AndErrorsTheStoreAnsweredAre500() {
        let outages: [any Error] = [
            RedisError(code: .connection, message: "refused"), RedisError(code: .authentication, message: "auth"),
            RedisError(code: .server("READONLY"), message: "replica"),
            RedisError(code: .server("LOADING"), message: "loading"),
            PostgresError(code: .connectionClosed, message: "closed"),
        ]
        for error in outages {
            #expect(StorageFailure.isOutage(error), "\(error)")
            #expect(StorageFailure.apiError(for: error) == .storageUnavailable, "\(error)")
        }
        let answered: [any Error] = [
            RedisError(code: .server("WRONGTYPE"), message: "type"), RedisError(code: .unexpectedReply, message: "x"),
            PostgresError(code: .server(sqlState: "23505"), message: "unique"),
        ]
        for error in answered {
            #expect(!StorageFailure.isOutage(error), "\(error)")
            #expect(StorageFailure.apiError(for: error) == .storageFailed, "\(error)")
        }
    }
}
