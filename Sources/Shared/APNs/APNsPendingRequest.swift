/// One accepted request on its way to APNs: which of its submission's
/// notifications it sends, its deadline and the submission waiting for it. The
/// connection writes its header fields into a buffer of its own when the request
/// gets a stream, so an accepted request costs this one object. `complete`
/// reports the outcome exactly once, whichever of answer, timeout, connection
/// loss or shutdown comes first; later calls do nothing.
///
/// `@unchecked Sendable`: the client makes it and hands it to the loop once, under
/// its inbox lock; from then on only the loop's thread touches it.
final class APNsPendingRequest: @unchecked Sendable {
    let submission: APNsSubmission
    let deadline: ContinuousClock.Instant
    /// How often it was sent again after GOAWAY or REFUSED_STREAM.
    var retries = 0
    /// Which of the submission's notifications this is.
    private let index: Int
    private(set) var isComplete = false

    init(index: Int, of submission: APNsSubmission, deadline: ContinuousClock.Instant) {
        self.index = index
        self.submission = submission
        self.deadline = deadline
    }

    var poolKey: APNsPoolKey { submission.key }

    /// The notification's payload, after writing its request's header fields into
    /// `fields` (emptied first).
    func writeRequest(into fields: inout HTTP2HeaderFields) -> [UInt8] {
        fields.removeAll()
        // Read field by field through the pointer: a subscript, or a method called on
        // `pointee`, copies the whole notification (retaining and releasing each of its
        // strings) first.
        return submission.notifications.withUnsafeBufferPointer { notifications in
            let notification = notifications.baseAddress.unsafelyUnwrapped + index
            APNsNotification.appendRequestHeaders(
                of: notification, to: &fields, authority: submission.key.environment.authority,
                providerToken: submission.token)
            return notification.pointee.payload
        }
    }

    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        guard !isComplete else { return }
        isComplete = true
        submission.complete(index, result)
    }

    func fail(_ error: APNsClientError) { complete(.failure(error)) }
}
