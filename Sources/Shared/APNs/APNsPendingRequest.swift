/// One accepted request on its way to APNs: its header fields and payload, its
/// deadline and the submission waiting for it. The submitter writes the fields,
/// so the loop only hands them to nghttp2. `complete` reports the outcome exactly
/// once, whichever of answer, timeout, connection loss or shutdown comes first;
/// later calls do nothing.
///
/// `@unchecked Sendable`: the client makes it and hands it to the loop once, under
/// its inbox lock; from then on only the loop's thread touches it.
final class APNsPendingRequest: @unchecked Sendable {
    let fields: HTTP2HeaderFields
    let payload: [UInt8]
    let poolKey: APNsPoolKey
    let deadline: ContinuousClock.Instant
    /// How often it was sent again after GOAWAY or REFUSED_STREAM.
    var retries = 0
    /// Which of the submission's notifications this is.
    private let index: Int
    private var submission: APNsSubmission?

    init(
        fields: HTTP2HeaderFields, payload: [UInt8], poolKey: APNsPoolKey, deadline: ContinuousClock.Instant,
        index: Int, submission: APNsSubmission
    ) {
        self.fields = fields
        self.payload = payload
        self.poolKey = poolKey
        self.deadline = deadline
        self.index = index
        self.submission = submission
    }

    var isComplete: Bool { submission == nil }

    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        guard let submission else { return }
        self.submission = nil
        submission.complete(index, result)
    }

    func fail(_ error: APNsClientError) { complete(.failure(error)) }
}
