import Foundation
import Synchronization

/// Provider tokens shared by every worker process through Redis: one token per
/// credential, re-signed by whichever worker first finds it too old, under a
/// lock (`SET NX PX`), so a fleet signs once where each worker alone would sign
/// many times. Each process keeps its own copy for `localCacheLifetime`, so Redis
/// is asked about once a minute per credential, not per request.
///
/// Keys (the credential id is a hash tag, so both live on one Cluster shard):
/// `pushgate:apns:{<credential id>}:token` holds `v1|<iat>|<key id>|<team id>|<jwt>`
/// and expires after an hour (Apple's limit); `…:token-lock` is the signing lock.
public final class RedisProviderTokenStore: ProviderTokenStore {
    public let policy: ProviderTokenPolicy
    private let redis: RedisClient
    private let now: @Sendable () -> Date
    private let lockLifetime: Duration
    /// Longer than `lockLifetime`: a waiter whose signer died outlives the lock and
    /// takes it over, rather than failing the send.
    private let waitForSigner: Duration
    private let local = Mutex<[String: (token: ProviderToken, fetchedAt: Date)]>([:])
    private let signatures = Atomic<Int>(0)

    public init(
        redis: RedisClient, policy: ProviderTokenPolicy = ProviderTokenPolicy(), lockLifetime: Duration = .seconds(5),
        waitForSigner: Duration = .seconds(12), now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.redis = redis
        self.policy = policy
        self.lockLifetime = lockLifetime
        self.waitForSigner = waitForSigner
        self.now = now
    }

    /// How many tokens this process has signed.
    public var signedCount: Int { signatures.load(ordering: .relaxed) }

    public func token(for credential: APNsCredential) async throws -> String {
        let now = now()
        if let cached = local.withLock({ $0[credential.id] }),
            policy.canUseLocalCopy(cached.token, fetchedAt: cached.fetchedAt, for: credential, now: now)
        {
            return cached.token.value
        }
        return try await resolve(credential, rejected: nil)
    }

    public func token(for credential: APNsCredential, replacing rejected: RejectedProviderToken) async throws -> String
    {
        try await resolve(credential, rejected: rejected)
    }

    // MARK: Internals

    static func tokenKey(_ credential: APNsCredential) -> String { "pushgate:apns:{\(credential.id)}:token" }
    static func lockKey(_ credential: APNsCredential) -> String { "pushgate:apns:{\(credential.id)}:token-lock" }

    private func resolve(_ credential: APNsCredential, rejected: RejectedProviderToken?) async throws -> String {
        let giveUp = ContinuousClock.now + waitForSigner
        while true {
            let current = try await read(credential)
            switch policy.decide(current: current, for: credential, rejected: rejected, now: now()) {
            case .use(let token):
                remember(token, for: credential)
                return token.value
            case .sign:
                if let token = try await signUnderLock(credential, rejected: rejected) {
                    remember(token, for: credential)
                    return token.value
                }
                // Another worker is signing. A token it is replacing only for age is
                // still accepted by Apple meanwhile (it is under an hour old).
                if let current, current.belongs(to: credential), current.value != rejected?.token,
                    now().timeIntervalSince(current.issuedAt) < 55 * 60
                {
                    return current.value
                }
                guard ContinuousClock.now < giveUp else {
                    throw APNsClientError(
                        .providerTokenStore, "another worker holds the signing lock and published no token")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// Signs and publishes a token if the lock is free; nil if another worker holds it.
    private func signUnderLock(_ credential: APNsCredential, rejected: RejectedProviderToken?) async throws
        -> ProviderToken?
    {
        let lockKey = Self.lockKey(credential)
        let owner = UUID().uuidString
        let acquired = try await redis.send("SET", lockKey, owner, "NX", "PX", lockLifetime.inWholeMilliseconds)
            .throwingError()
        guard acquired.string == "OK" else { return nil }
        do {
            // Someone may have published a token between our read and the lock.
            let now = now()
            let token: ProviderToken
            switch policy.decide(current: try await read(credential), for: credential, rejected: rejected, now: now) {
            case .use(let existing):
                token = existing
            case .sign:
                token = try ProviderToken.sign(for: credential, now: now)
                signatures.add(1, ordering: .relaxed)
                let ttl = Int(max(policy.refreshAge, 60 * 60) * 1000)
                _ = try await redis.send("SET", Self.tokenKey(credential), Self.encode(token), "PX", ttl)
                    .throwingError()
            }
            _ = try? await redis.run(.deleteIfHolding, keys: [lockKey], arguments: [owner])
            return token
        } catch {
            _ = try? await redis.run(.deleteIfHolding, keys: [lockKey], arguments: [owner])
            throw error
        }
    }

    private func read(_ credential: APNsCredential) async throws -> ProviderToken? {
        let reply = try await redis.send("GET", Self.tokenKey(credential)).throwingError()
        return reply.string.flatMap(Self.decode)
    }

    private func remember(_ token: ProviderToken, for credential: APNsCredential) {
        let fetchedAt = now()
        local.withLock { $0[credential.id] = (token, fetchedAt) }
    }

    static func encode(_ token: ProviderToken) -> String {
        "v1|\(Int64(token.issuedAt.timeIntervalSince1970))|\(token.keyID)|\(token.teamID)|\(token.value)"
    }

    static func decode(_ text: String) -> ProviderToken? {
        let parts = text.split(separator: "|", maxSplits: 4, omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "v1", let seconds = Int64(parts[1]), !parts[4].isEmpty else { return nil }
        return ProviderToken(
            value: String(parts[4]), issuedAt: Date(timeIntervalSince1970: TimeInterval(seconds)),
            keyID: String(parts[2]),
            teamID: String(parts[3]))
    }
}
