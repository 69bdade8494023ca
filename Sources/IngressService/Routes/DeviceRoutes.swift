import Foundation
import Shared

/// The device endpoints under `/api/push/v1/subscriptions`: register, update,
/// pending stash, activate, delete. Per-client-IP limits come first, then the
/// Bearer secret (compared as SHA-256 hashes in constant time), then the body.
struct DeviceRoutes: Sendable {
    let subscriptions: SubscriptionRepository
    let directory: AppDirectory
    let limiter: SlidingWindowLimiter
    var invalidation: CacheInvalidation
    /// Fills a subscription's cache entry after each change (`cacheAgain`).
    let cache: HotPathCache
    let redis: RedisClient
    let keys: RedisKeys
    let publicPushBase: String
    let stashLifetimeMilliseconds: Int64
    /// How long a cache invalidation that failed after a committed update or
    /// activation is tried again in the background (`CACHE_TTL_SECONDS`).
    var invalidationRetryWindow: Duration = .seconds(300)
    var logger = Logger(component: "ingress.device")
    /// Made once, so the retried invalidations of all device requests share its throttles.
    var invalidationLog = InvalidationRetryLog(logger: Logger(component: "ingress.device"))
    /// How long a device request waits on Postgres and Redis before answering 503
    /// (`IngressHandler`); the App API's reads wait as long (`AppAPISender.readWait`).
    static let storageWait: Duration = .seconds(5)

    /// A request whose body passed its limit (not read past it): an attempt like any
    /// other, counted against the client's limit (429 once over it), else 413.
    func oversized(registration: Bool, client: String) async throws -> HTTPResponse {
        try await limiter.admit(registration ? .registration : .device, client: client)
        return PushAPIError.tooLarge.response
    }

    /// `POST /v1/subscriptions` → 201 `{id, secret, url}`.
    func register(_ request: HTTPRequest, client: String) async throws -> HTTPResponse {
        try await limiter.admit(.registration, client: client)
        let input = try SubscriptionInput(json: request.body)
        try input.requireRegistrationFields()
        guard let topic = input.topic, let token = input.token, let sandbox = input.sandbox else {
            throw PushAPIError.invalid("topic, token and sandbox are required")
        }
        guard let owner = try await directory.owner(ofTopic: topic), owner.acceptsPush else {
            throw PushAPIError.unknownApp
        }
        let secret = Base64URL.encode(SecureRandom.bytes(32))
        var id = ""
        for attempt in 1...3 {
            id = Base64URL.encode(SecureRandom.bytes(16))
            do {
                try await subscriptions.insert(
                    .init(
                        id: id, appID: owner.appID, topic: owner.bundleID, deviceToken: token, sandbox: sandbox,
                        alertTitle: input.alertTitle ?? "", alertBody: input.alertBody ?? SubscriptionInput.defaultBody,
                        p256dh: input.p256dh, auth: input.auth, secretHash: SHA256.hash(secret)))
                break
            } catch let error as PostgresError where error.isUniqueViolation && attempt < 3 {
                continue  // 128 random bits colliding: practically never
            }
        }
        // A negative cache entry for this id (a guess that came first) must not hide it.
        try? await invalidation.subscriptionChanged(id)
        await cacheAgain(id)
        let body =
            "{\"id\":\(JSONString.quote(id)),\"secret\":\(JSONString.quote(secret)),\"url\":\(JSONString.quote(publicPushBase + id))}"
        return .json(201, body)
    }

    /// `PUT /v1/subscriptions/{id}` → 204.
    func update(_ request: HTTPRequest, id: String, client: String) async throws -> HTTPResponse {
        try await limiter.admit(.device, client: client)
        let current = try await authenticate(request, id: id)
        let input = try SubscriptionInput.update(json: request.body)
        if let topic = input.topic, topic.lowercased() != current.topic.lowercased() {
            throw PushAPIError.invalid("topic cannot be changed; register a new subscription")
        }
        guard
            try await subscriptions.update(
                id, deviceToken: input.token, sandbox: input.sandbox, alertTitle: input.alertTitle,
                alertBody: input.alertBody, p256dh: input.p256dh, auth: input.auth)
        else { throw PushAPIError.notFound }
        // A PUT that changes only the keys or the last-seen time (an app launch's
        // refresh) leaves the cache entry as it is.
        if input.changesCachedFields {
            try await invalidateAfterCommit("subscription update") { [invalidation] in
                try await invalidation.subscriptionChanged(id)
            }
            await cacheAgain(id)
        }
        return HTTPResponse(status: 204)
    }

    /// `GET /v1/subscriptions/{id}/pending` → `{messages: [base64url…]}`, oldest first.
    func pending(_ request: HTTPRequest, id: String, client: String) async throws -> HTTPResponse {
        try await limiter.admit(.device, client: client)
        _ = try await authenticate(request, id: id)
        let reply = try await redis.send(
            StashScript.command(subscriptionID: id, lifetimeMilliseconds: stashLifetimeMilliseconds, keys: keys))
        let messages = (reply.array ?? []).compactMap(\.bytes).map { JSONString.quote(Base64URL.encode($0)) }
        return .json(200, "{\"messages\":[" + messages.joined(separator: ",") + "]}")
    }

    /// `POST /v1/subscriptions/{id}/activate` → 204; the stash is cleared.
    func activate(_ request: HTTPRequest, id: String, client: String) async throws -> HTTPResponse {
        try await limiter.admit(.device, client: client)
        _ = try await authenticate(request, id: id)
        guard try await subscriptions.activate(id) else { throw PushAPIError.notFound }
        try await invalidateAfterCommit("subscription activation") { [invalidation] in
            try await invalidation.subscriptionActivated(id)
        }
        await cacheAgain(id)
        return HTTPResponse(status: 204)
    }

    /// Reads a subscription just written into the cache (or, deleted, its absence), so
    /// that the next push to it (a server's verification right after registering, the
    /// first after activating, one after the device deleted it) is answered from
    /// Redis: no Postgres read on its path, nor a lookup counted against its sender's
    /// address (`RATE_LIMIT_UNKNOWN_PUSH`, which a busy sender pushing to stale URLs
    /// may have used up). A failed fill only leaves it to that push, and one that has
    /// not answered within `cacheAgainWait` goes on without holding the answer: the
    /// change is committed, and a 503 past `storageWait` would lose a registration's
    /// secret (the fills' pool may be taken up by a flood of pushes to unknown URLs).
    private func cacheAgain(_ id: String) async {
        _ = try? await withTimeLimit(Self.cacheAgainWait) { [cache] in
            try await cache.fill(kind: "subscription", id: id, subscriptionID: id)
        }
    }

    /// How long a device request waits for `cacheAgain`.
    static let cacheAgainWait: Duration = .milliseconds(500)

    /// The cache invalidation after a committed change (`CacheInvalidation.afterCommit`):
    /// a client told 5xx may never come back, and the cached entry would keep the old
    /// token, or keep stashing an active device's pushes, for its freshness.
    private func invalidateAfterCommit(_ what: String, _ body: @escaping @Sendable () async throws -> Void)
        async throws
    {
        try await CacheInvalidation.afterCommit(what, retryingFor: invalidationRetryWindow, log: invalidationLog, body)
    }

    /// `DELETE /v1/subscriptions/{id}` → 204; the row, its cache and its stash are gone.
    func delete(_ request: HTTPRequest, id: String, client: String) async throws -> HTTPResponse {
        try await limiter.admit(.device, client: client)
        _ = try await authenticate(request, id: id)
        // The cache first: if Redis cannot be written, nothing is deleted and the
        // client can try again. (Row first, a failure here left the cached
        // subscription taking pushes for the cache's lifetime, and the retry said 404.)
        try await invalidation.subscriptionsDeleted([id])
        guard try await subscriptions.delete(id) else { throw PushAPIError.notFound }
        // Again, for a cache fill that read the row in between.
        try await invalidation.subscriptionsDeleted([id])
        // Now a negative entry: the sender's next pushes are answered 404 from Redis,
        // without a lookup its address may have used up (a 429 would not tell it to stop).
        await cacheAgain(id)
        return HTTPResponse(status: 204)
    }

    /// 1002 without a Bearer secret; 1003 for an unknown id or a wrong secret alike.
    private func authenticate(_ request: HTTPRequest, id: String) async throws -> SubscriptionRepository.Credentials {
        guard let secret = Self.bearer(request.headers["Authorization"]) else { throw PushAPIError.missingCredentials }
        let presented = SHA256.hash(secret)
        guard SubscriptionID.isWellFormed(id), let stored = try await subscriptions.credentials(id) else {
            _ = ConstantTime.equals(presented, presented)  // same work as a wrong secret
            throw PushAPIError.notFound
        }
        guard ConstantTime.equals(presented, stored.secretHash) else { throw PushAPIError.notFound }
        return stored
    }

    static func bearer(_ header: String?) -> String? {
        guard let header else { return nil }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let secret = parts[1].trimmingCharacters(in: .whitespaces)
        return secret.isEmpty ? nil : secret
    }
}
