/// Tells the ingress's caches (Redis) that configuration changed, so the change
/// takes effect at once instead of when a cache entry expires. Called after the
/// change is committed.
protocol CacheInvalidator: Sendable {
    /// Plan or anything else the hot path reads of the account.
    func accountChanged(_ accountID: String) async throws
    /// Push enabled, credential, identifiers (old and new topics), or the app was deleted.
    func appChanged(_ appID: String, topics: [String]) async throws
    /// Subscriptions deleted by the change (removed identifiers, deleted app or account).
    func subscriptionsDeleted(_ subscriptionIDs: [String]) async throws
    /// Subscriptions whose cached row changed (their identifier's case was edited).
    func subscriptionsChanged(_ subscriptionIDs: [String]) async throws
    /// The credential was added, replaced or deleted (the worker's key cache).
    func credentialChanged(_ credentialID: String) async throws
    /// A user's ban, authorization, unsubscribe or disable changed.
    func userChanged(_ userID: String, appID: String?) async throws
    /// An App API key was revoked (its SHA-256, as the App API looks keys up by it).
    func apiKeyRevoked(keyHash: [UInt8]) async throws
}

/// For tests of the admin API alone and until the ingress cache exists: nothing cached, nothing to do.
struct NoCacheInvalidator: CacheInvalidator {
    func accountChanged(_ accountID: String) async throws {}
    func appChanged(_ appID: String, topics: [String]) async throws {}
    func subscriptionsDeleted(_ subscriptionIDs: [String]) async throws {}
    func subscriptionsChanged(_ subscriptionIDs: [String]) async throws {}
    func credentialChanged(_ credentialID: String) async throws {}
    func userChanged(_ userID: String, appID: String?) async throws {}
    func apiKeyRevoked(keyHash: [UInt8]) async throws {}
}
