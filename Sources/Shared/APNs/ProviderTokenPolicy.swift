import Foundation

/// When to re-sign a provider token: a pure state machine, given the current
/// shared token and the time (the clock is the caller's, so tests need none).
///
/// Apple's rules: a token is accepted for an hour after its `iat`, and a
/// provider must not sign a new one more often than every 20 minutes
/// (`TooManyProviderTokenUpdates`). So every connection and worker shares one
/// token per credential, re-signed once it is `refreshAge` old; an
/// `ExpiredProviderToken` answer re-signs early, but never before `minimumAge`.
/// An `InvalidProviderToken` answer re-signs at once: a token Apple does not verify
/// (one signed with a key since replaced under the same id, say) was never in use
/// there, so replacing it is no update, and a credential is only judged rejected
/// once a token signed just now is refused too.
public struct ProviderTokenPolicy: Sendable, Equatable {
    /// A token this old is replaced (default 50 minutes, before Apple's hour runs out).
    public var refreshAge: TimeInterval
    /// A token is never replaced younger than this, even when APNs rejects it (default 20 minutes).
    public var minimumAge: TimeInterval
    /// How long a process uses its own copy of the shared token before asking the
    /// shared store again (default 60 seconds), so the store is not asked per request.
    public var localCacheLifetime: TimeInterval

    public init(
        refreshAge: TimeInterval = 50 * 60, minimumAge: TimeInterval = 20 * 60, localCacheLifetime: TimeInterval = 60
    ) {
        precondition(refreshAge >= minimumAge && minimumAge >= 0 && localCacheLifetime >= 0)
        self.refreshAge = refreshAge
        self.minimumAge = minimumAge
        self.localCacheLifetime = localCacheLifetime
    }

    public enum Decision: Sendable, Equatable {
        /// Keep using this token.
        case use(ProviderToken)
        /// Sign a new one (under the store's lock, then decide again with what is there).
        case sign
    }

    /// What to do with `current`, the shared token for `credential` (nil when there
    /// is none), at `now`. `rejected` is a token APNs just refused, when that is why we ask.
    public func decide(
        current: ProviderToken?, for credential: APNsCredential, rejected: RejectedProviderToken? = nil, now: Date
    ) -> Decision {
        guard let current, current.belongs(to: credential) else { return .sign }
        let age = now.timeIntervalSince(current.issuedAt)
        if age >= refreshAge { return .sign }
        if let rejected, rejected.token == current.value, rejected.reason == .invalid || age >= minimumAge {
            return .sign
        }
        // An expired token younger than `minimumAge` (re-signing now would be
        // refused), or someone already replaced the rejected token: use what is there.
        return .use(current)
    }

    /// Whether a process's own copy of `token`, fetched from the shared store at
    /// `fetchedAt`, may be used at `now` without asking the store.
    public func canUseLocalCopy(_ token: ProviderToken, fetchedAt: Date, for credential: APNsCredential, now: Date)
        -> Bool
    {
        let sinceFetch = now.timeIntervalSince(fetchedAt)
        return token.belongs(to: credential) && sinceFetch >= 0 && sinceFetch < localCacheLifetime
            && now.timeIntervalSince(token.issuedAt) < refreshAge
    }
}

/// A provider token APNs refused, and why: the reason decides how soon it may be replaced.
public struct RejectedProviderToken: Sendable, Equatable {
    public enum Reason: Sendable, Equatable {
        /// `ExpiredProviderToken`: replaced only once `ProviderTokenPolicy.minimumAge` old.
        case expired
        /// `InvalidProviderToken`: replaced at once.
        case invalid
    }

    public let token: String
    public let reason: Reason

    public static func expired(_ token: String) -> RejectedProviderToken { .init(token: token, reason: .expired) }
    public static func invalid(_ token: String) -> RejectedProviderToken { .init(token: token, reason: .invalid) }

    /// The rejection APNs's answer `reason` means, if it is about the provider token.
    public init?(token: String, answer reason: APNsReason?) {
        switch reason {
        case .expiredProviderToken?: self.init(token: token, reason: .expired)
        case .invalidProviderToken?: self.init(token: token, reason: .invalid)
        default: return nil
        }
    }

    public init(token: String, reason: Reason) {
        self.token = token
        self.reason = reason
    }
}
