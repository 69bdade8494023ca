import Shared

/// A connection's provider-token state, as APNs keeps it: the token in use, once
/// verified, and when it was installed (a different token, issued less than
/// `tokenUpdatePeriodSeconds` after the current one, within that period of its
/// installation answers 429 TooManyProviderTokenUpdates).
///
/// The signature is checked once per connection and token; later requests with
/// the same token compare strings, and check only the age and that the key is
/// still valid (a key change bumps `SimulatorRules.keyGeneration`, which makes
/// the next request verify again). A value type with the clock passed in, so
/// tests drive it without sockets.
struct ProviderTokenCache: Sendable {
    struct Verified: Sendable, Equatable {
        let token: String
        let keyID: String
        let teamID: String
        /// `iat`, seconds since 1970.
        let issuedAt: Int64
        /// When this connection first accepted the token (seconds since 1970).
        let installedAt: Int64
        /// `SimulatorRules.keyGeneration` at verification.
        let keyGeneration: UInt64
    }

    private(set) var current: Verified?
    /// Signature verifications done, for the counters.
    private(set) var verifications = 0

    /// Checks the `authorization` field's value at `now` (seconds since 1970).
    /// On success the token is the connection's current one.
    mutating func authenticate(authorization: UnsafeBufferPointer<UInt8>?, rules: SimulatorRules, now: Int64) -> Result<
        Verified, APNsRejection
    > {
        // The usual request repeats the connection's token: compared in place, no copy made.
        if let authorization, let current, Self.isBearer(authorization, carrying: current.token) {
            return authenticateCurrent(rules: rules, now: now)
        }
        return authenticateNew(
            authorization: authorization.map { String(decoding: $0, as: UTF8.self) }, rules: rules, now: now)
    }

    /// The request does not carry the connection's current token.
    private mutating func authenticateNew(authorization: String?, rules: SimulatorRules, now: Int64) -> Result<
        Verified, APNsRejection
    > {
        guard let token = Self.bearerToken(authorization) else {
            return .failure(
                authorization.map { Self.hasBearerScheme($0) } == false ? .invalidProviderToken : .missingProviderToken)
        }
        let verified: Verified
        switch verify(token, rules: rules, installedAt: now) {
        case .failure(let rejection): return .failure(rejection)
        case .success(let value): verified = value
        }
        if case .failure(let rejection) = checkAge(verified, rules: rules, now: now) { return .failure(rejection) }
        // Apple: a connection keeps the key (and team) of its first token; another
        // key's token needs a connection of its own.
        if let current, verified.keyID != current.keyID { return .failure(.unrelatedKeyIdInToken) }
        // Too many updates: a token made within the period after the connection's
        // current one (Apple: tokens may be recreated at most every 20 minutes), on a
        // connection that took its current one within the period. A token made a full
        // period later is taken at once, even on a young connection (the normal
        // 50-minute refresh reaching a connection opened just before it).
        if let current, now - current.installedAt < rules.tokenUpdatePeriodSeconds,
            verified.issuedAt - current.issuedAt < rules.tokenUpdatePeriodSeconds
        {
            return .failure(.tooManyProviderTokenUpdates)
        }
        current = verified
        return .success(verified)
    }

    /// The request carries the connection's current token.
    private mutating func authenticateCurrent(rules: SimulatorRules, now: Int64) -> Result<Verified, APNsRejection> {
        guard let current else { return .failure(.invalidProviderToken) }
        if current.keyGeneration != rules.keyGeneration {
            // Keys changed since: verify again, keeping the installation time.
            switch verify(current.token, rules: rules, installedAt: current.installedAt) {
            case .failure(let rejection): return .failure(rejection)
            case .success(let verified): self.current = verified
            }
        }
        return checkAge(self.current!, rules: rules, now: now)
    }

    private mutating func verify(_ token: String, rules: SimulatorRules, installedAt: Int64) -> Result<
        Verified, APNsRejection
    > {
        guard let jwt = try? ES256JWT(parsing: token), let keyID = jwt.header.keyID, let key = rules.keys[keyID],
            !key.isRevoked, let issuer = jwt.claims.issuer, issuer == key.teamID, let issuedAt = jwt.claims.issuedAt
        else { return .failure(.invalidProviderToken) }
        verifications += 1
        guard (try? jwt.verify(with: key.publicKey)) != nil else { return .failure(.invalidProviderToken) }
        return .success(
            Verified(
                token: token, keyID: keyID, teamID: issuer, issuedAt: issuedAt, installedAt: installedAt,
                keyGeneration: rules.keyGeneration))
    }

    /// Apple: `iat` "must be no more than one hour from the current time", either way.
    /// One far in the future (an `iat` in milliseconds, a clock running fast) is refused.
    private func checkAge(_ verified: Verified, rules: SimulatorRules, now: Int64) -> Result<Verified, APNsRejection> {
        if now - verified.issuedAt > rules.tokenLifetimeSeconds { return .failure(.expiredProviderToken) }
        if verified.issuedAt - now > rules.tokenLifetimeSeconds { return .failure(.invalidProviderToken) }
        return .success(verified)
    }

    /// The token of `bearer <token>` (scheme case-insensitive), or nil.
    static func bearerToken(_ value: String?) -> String? {
        guard let value, hasBearerScheme(value) else { return nil }
        let token = value.utf8.dropFirst(7)
        guard !token.isEmpty else { return nil }
        return String(token)
    }

    /// `authorization` is `bearer <token>` (scheme any case) for exactly `token`:
    /// compared in place, as it runs per request.
    static func isBearer(_ authorization: String, carrying token: String) -> Bool {
        UTF8Bytes.with(authorization) { isBearer($0, carrying: token) }
    }

    static func isBearer(_ authorization: UnsafeBufferPointer<UInt8>, carrying token: String) -> Bool {
        UTF8Bytes.with(token) { token in
            !token.isEmpty && authorization.count == token.count + 7 && hasBearerScheme(authorization)
                && UTF8Bytes.equal(UnsafeBufferPointer(rebasing: authorization[7...]), token)
        }
    }

    /// `bearer ` (or a bare `bearer`), any case.
    private static func hasBearerScheme(_ value: String) -> Bool {
        UTF8Bytes.with(value) { hasBearerScheme($0) }
    }

    private static func hasBearerScheme(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        let scheme: StaticString = "bearer"
        guard value.count >= 6 else { return false }
        for offset in 0..<6 where value[offset] | 0x20 != scheme.utf8Start[offset] { return false }
        return value.count == 6 || value[6] == 0x20
    }
}
