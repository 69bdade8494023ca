/// One accepted request on its way to APNs: the notification, the provider token
/// it goes with, its deadline and the `send` waiting for it. Its request headers
/// are written only when a stream takes it. `complete` resumes the caller exactly
/// once, whichever of answer, timeout, connection loss or shutdown comes first;
/// later calls do nothing.
///
/// `@unchecked Sendable`: `send` makes it and hands it to the loop once, under the
/// client's inbox lock; from then on only the loop's thread touches it.
final class APNsPendingRequest: @unchecked Sendable {
    let notification: APNsNotification
    let providerToken: String
    let poolKey: APNsPoolKey
    let deadline: ContinuousClock.Instant
    /// How often it was sent again after GOAWAY or REFUSED_STREAM.
    var retries = 0
    private var continuation: UnsafeContinuation<APNsResponse, any Error>?

    init(
        notification: APNsNotification, providerToken: String, poolKey: APNsPoolKey,
        deadline: ContinuousClock.Instant, continuation: UnsafeContinuation<APNsResponse, any Error>
    ) {
        self.notification = notification
        self.providerToken = providerToken
        self.poolKey = poolKey
        self.deadline = deadline
        self.continuation = continuation
    }

    var isComplete: Bool { continuation == nil }

    /// Adds the request's header fields for `authority` to `fields`.
    func appendHeaders(to fields: inout HTTP2HeaderFields, authority: String) {
        notification.appendRequestHeaders(to: &fields, authority: authority, providerToken: providerToken)
    }

    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(with: result)
    }

    func fail(_ error: APNsClientError) { complete(.failure(error)) }
}
