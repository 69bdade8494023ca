/// One accepted request on its way to APNs: its header fields and payload, its
/// deadline and the `send` waiting for it. `send` writes the fields, so the loop
/// only hands them to nghttp2. `complete` resumes the caller exactly once,
/// whichever of answer, timeout, connection loss or shutdown comes first; later
/// calls do nothing.
///
/// `@unchecked Sendable`: `send` makes it and hands it to the loop once, under the
/// client's inbox lock; from then on only the loop's thread touches it.
final class APNsPendingRequest: @unchecked Sendable {
    let fields: HTTP2HeaderFields
    let payload: [UInt8]
    let poolKey: APNsPoolKey
    let deadline: ContinuousClock.Instant
    /// How often it was sent again after GOAWAY or REFUSED_STREAM.
    var retries = 0
    private var continuation: UnsafeContinuation<APNsResponse, any Error>?

    init(
        fields: HTTP2HeaderFields, payload: [UInt8], poolKey: APNsPoolKey, deadline: ContinuousClock.Instant,
        continuation: UnsafeContinuation<APNsResponse, any Error>
    ) {
        self.fields = fields
        self.payload = payload
        self.poolKey = poolKey
        self.deadline = deadline
        self.continuation = continuation
    }

    var isComplete: Bool { continuation == nil }

    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(with: result)
    }

    func fail(_ error: APNsClientError) { complete(.failure(error)) }
}
