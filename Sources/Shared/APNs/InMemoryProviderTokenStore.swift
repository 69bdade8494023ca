import Foundation
import Synchronization

/// Provider tokens shared by the connections of one process: for tools, tests
/// and single-process setups. Workers share theirs through `RedisProviderTokenStore`.
public final class InMemoryProviderTokenStore: ProviderTokenStore {
    public let policy: ProviderTokenPolicy
    private let now: @Sendable () -> Date
    private let tokens = Mutex<[String: ProviderToken]>([:])
    private let signatures = Atomic<Int>(0)

    public init(policy: ProviderTokenPolicy = ProviderTokenPolicy(), now: @escaping @Sendable () -> Date = Date.init) {
        self.policy = policy
        self.now = now
    }

    /// How many tokens this store has signed.
    public var signedCount: Int { signatures.load(ordering: .relaxed) }

    public func token(for credential: APNsCredential) async throws -> String {
        try resolve(credential, rejected: nil)
    }

    public func token(for credential: APNsCredential, replacing rejected: RejectedProviderToken) async throws -> String
    {
        try resolve(credential, rejected: rejected)
    }

    private func resolve(_ credential: APNsCredential, rejected: RejectedProviderToken?) throws -> String {
        let now = now()
        // Signing under the lock is rare (every ~50 minutes) and takes microseconds.
        return try tokens.withLock { tokens in
            switch policy.decide(current: tokens[credential.id], for: credential, rejected: rejected, now: now) {
            case .use(let token):
                return token.value
            case .sign:
                let token = try ProviderToken.sign(for: credential, now: now)
                tokens[credential.id] = token
                signatures.add(1, ordering: .relaxed)
                return token.value
            }
        }
    }
}
