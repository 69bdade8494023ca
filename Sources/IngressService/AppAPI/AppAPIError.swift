import Shared

/// An App API failure: its HTTP status and `{"error": "<message>"}` naming the problem.
struct AppAPIError: Error, Sendable, Equatable {
    let status: Int
    let message: String
    /// Seconds for `Retry-After` (429, 503).
    var retryAfter: Int? = nil

    static let missingKey = AppAPIError(status: 401, message: "missing App API key (Authorization: Bearer <key>)")
    static let unknownKey = AppAPIError(status: 401, message: "unknown or revoked App API key")
    static let missingScope = AppAPIError(status: 403, message: "the App API key lacks the push:send scope")
    static let subscriptionNotFound = AppAPIError(status: 404, message: "subscription not found")
    static let wrongSecret = AppAPIError(status: 403, message: "the subscription secret does not match")
    static let userNotAuthorized = AppAPIError(status: 403, message: "the user has not authorized this app")
    /// The app's push is off, or its owner's plan has none: every send is refused alike.
    static let pushDisabled = AppAPIError(status: 403, message: "push is disabled for this app")
    static let storage = AppAPIError(
        status: 503, message: "storage error", retryAfter: PushAPIError.unavailableRetrySeconds)
    /// The body passes its limit (about 1.1 MB for a send, 64 KiB otherwise).
    static let tooLarge = AppAPIError(status: 413, message: "request body too large")
    /// The ingress is stopping, or its memory for request bodies is full: try again.
    static let unavailable = AppAPIError(
        status: 503, message: "temporarily unavailable; try again", retryAfter: PushAPIError.unavailableRetrySeconds)
    static func invalid(_ detail: String) -> AppAPIError {
        AppAPIError(status: 400, message: "invalid request: " + detail)
    }
    /// The spec's "429 with code 1006" for every limit, so the message leads with the code.
    static func tooManyRequests(retryAfter: Int) -> AppAPIError {
        let code = PushAPIError.Code.tooManyRequests
        return AppAPIError(status: 429, message: "\(code.rawValue) \(code.message)", retryAfter: max(retryAfter, 1))
    }

    var response: HTTPResponse {
        var headers = HTTPHeaders()
        if let retryAfter { headers.add("Retry-After", String(retryAfter)) }
        if status == 401 { headers.add("WWW-Authenticate", "Bearer") }
        return .json(status, "{\"error\": " + JSONString.quote(message) + "}", headers: headers)
    }
}
