/// One accepted request on its way to APNs: its wire form, its deadline and the
/// continuation of the `send` waiting for it. Loop-confined. `complete` resumes the
/// caller exactly once, whichever of answer, timeout, connection loss or shutdown
/// comes first; later calls do nothing.
final class APNsPendingRequest {
    let headers: [HTTP2Header]
    let body: [UInt8]
    let deadline: ContinuousClock.Instant
    /// How often it was sent again after GOAWAY or REFUSED_STREAM.
    var retries = 0
    private var completion: ((Result<APNsResponse, APNsClientError>) -> Void)?

    init(
        headers: [HTTP2Header], body: [UInt8], deadline: ContinuousClock.Instant,
        completion: @escaping (Result<APNsResponse, APNsClientError>) -> Void
    ) {
        self.headers = headers
        self.body = body
        self.deadline = deadline
        self.completion = completion
    }

    var isComplete: Bool { completion == nil }

    func complete(_ result: Result<APNsResponse, APNsClientError>) {
        guard let completion else { return }
        self.completion = nil
        completion(result)
    }

    func fail(_ error: APNsClientError) { complete(.failure(error)) }
}
