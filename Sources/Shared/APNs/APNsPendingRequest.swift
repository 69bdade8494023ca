/// One accepted request on its way to APNs: which of its submission's
/// notifications it sends, its deadline and the submission waiting for it. The
/// connection writes its header fields into a buffer of its own when the request
/// gets a stream.
///
/// A value, not an object: it is in exactly one place at a time (the client's
/// inbox, a pool's queue, a connection's in-flight table), and whichever takes
/// it out for good completes it, so it is completed exactly once without a flag
/// of its own and an accepted request costs no allocation (a batch's requests
/// share their submission).
struct APNsPendingRequest: Sendable {
    let submission: APNsSubmission
    let deadline: ContinuousClock.Instant
    /// How often it was sent again after GOAWAY or REFUSED_STREAM.
    var retries = 0
    /// Which of the submission's notifications this is.
    private let index: Int

    init(index: Int, of submission: APNsSubmission, deadline: ContinuousClock.Instant) {
        self.index = index
        self.submission = submission
        self.deadline = deadline
    }

    var poolKey: APNsPoolKey { submission.key }

    /// The notification's payload, after writing its request's header fields into
    /// `fields` (emptied first).
    func writeRequest(into fields: inout HTTP2HeaderFields) -> ArraySlice<UInt8> {
        fields.removeAll()
        submission.notifications.appendRequestHeaders(
            of: index, to: &fields, authority: submission.key.environment.authority, providerToken: submission.token)
        return submission.notifications.payload(of: index)
    }

    /// Reports the outcome; the caller has taken the request out of wherever it was.
    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        submission.complete(index, result)
    }

    func fail(_ error: APNsClientError) { complete(.failure(error)) }
}
