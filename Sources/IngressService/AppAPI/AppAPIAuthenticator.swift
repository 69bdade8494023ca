import Shared

/// `Authorization: Bearer <key>` → the key's app. The key is hashed (SHA-256) and
/// the stored hash compared in constant time; missing → 401, unknown or revoked →
/// 401, no `push:send` → 403.
struct AppAPIAuthenticator: Sendable {
    let keys: AppAPIKeyStore

    /// The presented key; missing → 401, without asking anything.
    func key(in request: HTTPRequest) throws(AppAPIError) -> String {
        guard let key = DeviceRoutes.bearer(request.headers["Authorization"]) else { throw .missingKey }
        return key
    }

    /// The app of `key` (from `key(in:)`).
    func appID(forKey key: String) async throws -> String {
        let presented = SHA256.hash(key)
        guard let stored = try await keys.key(hash: presented) else {
            _ = ConstantTime.equals(presented, presented)  // same work as a match
            throw AppAPIError.unknownKey
        }
        guard ConstantTime.equals(presented, stored.keyHash), !stored.revoked else { throw AppAPIError.unknownKey }
        guard stored.scopes.contains(AppAPIScope.pushSend.rawValue) else { throw AppAPIError.missingScope }
        return stored.appID
    }
}
