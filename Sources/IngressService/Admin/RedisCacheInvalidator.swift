import Shared

/// Admin changes → the ingress's Redis cache (`CacheInvalidation`), so they take
/// effect for the next request instead of when the cached copy expires.
struct RedisCacheInvalidator: CacheInvalidator {
    let invalidation: CacheInvalidation

    func accountChanged(_ accountID: String) async throws {
        try await invalidation.accountChanged(accountID)
    }

    /// The app's cached row (push switch, credential); topics resolve through Postgres.
    func appChanged(_ appID: String, topics: [String]) async throws {
        try await invalidation.appChanged(appID)
    }

    func subscriptionsDeleted(_ subscriptionIDs: [String]) async throws {
        try await invalidation.subscriptionsDeleted(subscriptionIDs)
    }

    func subscriptionsChanged(_ subscriptionIDs: [String]) async throws {
        try await invalidation.subscriptionsChanged(subscriptionIDs)
    }

    /// Apps using the credential are invalidated by the controller; the worker reads
    /// credentials from Postgres.
    func credentialChanged(_ credentialID: String) async throws {}

    /// Users and API keys are not cached by the ingress (the App API, a later issue, will say if it caches them).
    func userChanged(_ userID: String, appID: String?) async throws {}

    func apiKeyRevoked(keyHash: [UInt8]) async throws {}
}
