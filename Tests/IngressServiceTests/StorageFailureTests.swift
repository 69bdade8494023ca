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
}
