import Synchronization

/// Notifications handed to the client together: they share a credential, an
/// environment, a provider token and the caller's completion, so a batch costs
/// one token fetch, one hand-over to the loop and one completion object.
///
/// An `ExpiredProviderToken` or `InvalidProviderToken` answer is not reported: the
/// client gets one new token (when the policy allows one) and sends that
/// notification again in a submission of its own (`isRefreshed`), whose answer is
/// final. So a credential is judged rejected only once a fresh token is refused too.
final class APNsSubmission: Sendable {
    /// Holds the client until every request has completed (requests time out, so
    /// the reference does not outlive the last deadline).
    let client: APNsClient
    let credential: APNsCredential
    let key: APNsPoolKey
    let token: String
    let notifications: APNsNotificationBatch
    let isRefreshed: Bool
    let completion: APNsClient.Completion
    /// The one token refresh of this submission, shared by all of its notifications
    /// APNs refused the token for: one fetch and one count, not one each.
    private let refresh = Mutex<Task<String, any Error>?>(nil)

    init(
        client: APNsClient, credential: APNsCredential, key: APNsPoolKey, token: String,
        notifications: APNsNotificationBatch, isRefreshed: Bool, completion: @escaping APNsClient.Completion
    ) {
        self.client = client
        self.credential = credential
        self.key = key
        self.token = token
        self.notifications = notifications
        self.isRefreshed = isRefreshed
        self.completion = completion
    }

    /// A new token from `fetch`, fetched once however many notifications ask.
    func refreshedToken(_ fetch: @escaping @Sendable () async throws -> String) async throws -> String {
        let task = refresh.withLock { task in
            if let task { return task }
            let started = Task { try await fetch() }
            task = started
            return started
        }
        return try await task.value
    }

    func complete(_ index: Int, _ result: Result<APNsResponse, APNsClientError>) {
        if !isRefreshed, case .success(let response) = result,
            let rejection = RejectedProviderToken(token: token, answer: response.reason)
        {
            Task { await client.resend(index, of: self, after: response, rejection: rejection) }
            return
        }
        completion(index, result)
    }
}
