import Foundation
import Shared

/// The App API under `/api/v1/app/push`: authenticate the key, count the app's
/// request in its shared window, then bind, unbind, list devices or send.
///
/// A key is looked up in Postgres, so each client IP may present keys that are not
/// (or no longer) valid only `RATE_LIMIT_APP_API_KEY_FAILURES` times per window
/// (`FailedLookupLimit`); past it its requests answer 429 before the lookup, but for
/// keys this process found valid lately (`RecentlyValidKeys`).
struct AppAPIRoutes: Sendable {
    let authenticator: AppAPIAuthenticator
    let repository: AppAPIRepository
    let limiter: SlidingWindowLimiter
    let keyLookups: FailedLookupLimit
    let validKeys: RecentlyValidKeys
    let sender: AppAPISender
    /// Storage failures (never keys, payloads or tokens).
    let failureLog: ThrottledLog

    /// Every App API route: errors become `{"error": …}` answers.
    func respond(_ route: Route, _ request: HTTPRequest) async -> HTTPResponse {
        do {
            let app = try await authenticate(request)
            do {
                try await limiter.admit(.appAPI, client: app)
            } catch let error as PushAPIError where error.code == .tooManyRequests {
                throw AppAPIError.tooManyRequests(retryAfter: error.retryAfter ?? 1)
            }
            switch route {
            case .appBind: return try await bind(request, app: app)
            case .appUnbind(let id): return try await unbind(id, app: app)
            case .appDevices(let user): return try await devices(user, app: app)
            case .appSend: return try await sender.send(SendBatch(json: request.body), app: app)
            default: return AppAPIError(status: 404, message: "not found").response
            }
        } catch let error as AppAPIError {
            return error.response
        } catch let error as PostgresError where error.code == .invalidParameter {
            return AppAPIError.invalid("a value holds a character that cannot be stored").response
        } catch {
            failureLog.warning("app API request failed: storage error", error: error)
            return AppAPIError.storage.response
        }
    }

    /// The key's app, within the client's allowance of failed keys: only an unknown
    /// or revoked key stays counted. A request without a key costs no lookup, so it
    /// is answered before the allowance is touched; nor is one past the allowance
    /// whose key was valid lately.
    private func authenticate(_ request: HTTPRequest) async throws -> String {
        let key = try authenticator.key(in: request)
        let keyHash = SHA256.hash(key)
        let lookup: FailedLookupLimit.Lookup?
        do {
            lookup = try await keyLookups.admit(request.head)
        } catch let error as PushAPIError where error.code == .tooManyRequests {
            guard validKeys.contains(keyHash) else {
                throw AppAPIError.tooManyRequests(retryAfter: error.retryAfter ?? 1)
            }
            lookup = nil
        }
        do {
            let app = try await withTimeLimit(AppAPISender.readWait) { [authenticator] in
                try await authenticator.appID(forKey: key)
            }
            validKeys.record(keyHash)
            if let lookup { await keyLookups.release(lookup) }
            return app
        } catch let error as AppAPIError where error == .unknownKey {
            throw error  // counted
        } catch {
            if let lookup { await keyLookups.release(lookup) }
            throw error
        }
    }

    /// `POST /subscriptions/bind` `{subscriptionId, secret, userId}` → 204.
    func bind(_ request: HTTPRequest, app: String) async throws -> HTTPResponse {
        guard StrictJSON.isWellFormed(request.body),
            let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
            let id = object["subscriptionId"] as? String, let secret = object["secret"] as? String,
            let user = object["userId"] as? String, !id.isEmpty, !secret.isEmpty, !user.isEmpty
        else { throw AppAPIError.invalid("subscriptionId, secret and userId are required strings") }
        let presented = SHA256.hash(secret)
        guard SubscriptionID.isWellFormed(id), let owner = try await repository.ownership(id), owner.appID == app else {
            _ = ConstantTime.equals(presented, presented)
            throw AppAPIError.subscriptionNotFound
        }
        guard ConstantTime.equals(presented, owner.secretHash) else { throw AppAPIError.wrongSecret }
        guard Self.canBeUserID(user), try await repository.hasAuthorized(user: user, app: app) else {
            throw AppAPIError.userNotAuthorized
        }
        guard try await repository.bind(id, app: app, user: user) else { throw AppAPIError.subscriptionNotFound }
        return HTTPResponse(status: 204)
    }

    /// Whether some user could have `id`: Postgres text cannot hold a NUL (its
    /// driver refuses one, which would otherwise answer as a storage failure).
    static func canBeUserID(_ id: String) -> Bool { !id.utf8.contains(0) }

    /// `DELETE /subscriptions/{id}/bind` → 204; the subscription stays, anonymous.
    func unbind(_ id: String, app: String) async throws -> HTTPResponse {
        guard SubscriptionID.isWellFormed(id), try await repository.unbind(id, app: app) else {
            throw AppAPIError.subscriptionNotFound
        }
        return HTTPResponse(status: 204)
    }

    /// `GET /users/{userId}/devices` → `{devices: [...]}`, active devices in this app.
    /// `user` is final: the HTTP server has percent-decoded the path already.
    func devices(_ user: String, app: String) async throws -> HTTPResponse {
        let devices = try await repository.devicesJSON(user: user, app: app)
        return .json(200, "{\"devices\":[" + devices.joined(separator: ",") + "]}")
    }
}
