import Shared

/// An answer of the device endpoints and Web Push delivery in the spec's error
/// format, `{"error": "<4-digit code> <English message>"}`, with its HTTP status.
public struct PushAPIError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The spec's error codes.
    public enum Code: Int, Sendable {
        case invalidParameters = 1001
        case missingCredentials = 1002
        case subscriptionNotFound = 1003
        case messageTooLarge = 1004
        case storageError = 1005
        case tooManyRequests = 1006
        case deliveryFailed = 1007
        case unknownApp = 1008
        case quotaExceeded = 1009
        case pushDisabled = 1010

        public var message: String {
            switch self {
            case .invalidParameters: "Invalid parameters"
            case .missingCredentials: "Missing credentials"
            case .subscriptionNotFound: "Subscription not found"
            case .messageTooLarge: "Message too large"
            case .storageError: "Storage error"
            case .tooManyRequests: "Too many requests"
            case .deliveryFailed: "Delivery failed"
            case .unknownApp: "Unknown app"
            case .quotaExceeded: "Monthly push quota used up"
            case .pushDisabled: "Push is disabled for this app"
            }
        }

        /// The usual status; some codes have a second one (404/410, 500/503).
        public var status: Int {
            switch self {
            case .invalidParameters, .unknownApp: 400
            case .missingCredentials: 401
            case .subscriptionNotFound: 404
            case .messageTooLarge: 413
            case .storageError: 503
            case .tooManyRequests, .quotaExceeded: 429
            case .deliveryFailed: 502
            case .pushDisabled: 403
            }
        }
    }

    public let code: Code
    public let status: Int
    /// What exactly is invalid (1001 only), appended as `: detail`. Never echoes input.
    public let detail: String?
    /// Seconds for `Retry-After` (429: 1006 and 1009; 502 while the circuit is up; 503).
    public let retryAfter: Int?

    public init(_ code: Code, status: Int? = nil, detail: String? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.status = status ?? code.status
        self.detail = detail
        self.retryAfter = retryAfter
    }

    public static func invalid(_ detail: String) -> PushAPIError { PushAPIError(.invalidParameters, detail: detail) }
    public static let missingCredentials = PushAPIError(.missingCredentials)
    public static let notFound = PushAPIError(.subscriptionNotFound)
    public static let gone = PushAPIError(.subscriptionNotFound, status: 410)
    public static let tooLarge = PushAPIError(.messageTooLarge)
    /// Redis or Postgres out of reach, or this replica stopping: another try soon (or at
    /// another replica) may succeed, which `Retry-After` says (RFC 9110 §10.2.3).
    public static let storageUnavailable = PushAPIError(.storageError, status: 503, retryAfter: unavailableRetrySeconds)
    /// The `Retry-After` of every 503: a Redis restart or a failover takes seconds.
    public static let unavailableRetrySeconds = 2
    public static let storageFailed = PushAPIError(.storageError, status: 500)
    public static let deliveryFailed = PushAPIError(.deliveryFailed)
    /// The workers' circuit flag for the app's APNs environment is up for `milliseconds`
    /// more at most, said in whole seconds rounded up (0: no expiry known, so none is said).
    public static func circuitOpen(forMilliseconds milliseconds: Int64) -> PushAPIError {
        PushAPIError(.deliveryFailed, retryAfter: milliseconds > 0 ? Int((milliseconds + 999) / 1000) : nil)
    }
    public static let unknownApp = PushAPIError(.unknownApp)
    /// The quota frees up at the next month, or sooner after an upgrade or a failed
    /// send's release: `Retry-After` says the sooner of the month's end and
    /// `quotaRetryCeiling`, so a sender that honours it does not wait out the month.
    public static func quotaExceeded(secondsToNextMonth: Int64) -> PushAPIError {
        PushAPIError(.quotaExceeded, retryAfter: Int(min(max(secondsToNextMonth, 1), quotaRetryCeiling)))
    }
    public static let quotaRetryCeiling: Int64 = 3600
    public static let pushDisabled = PushAPIError(.pushDisabled)
    /// A path without a route.
    public static let noSuchEndpoint = PushAPIError(.invalidParameters, status: 404, detail: "no such endpoint")
    /// A path that exists, with another method; `allowed` as in `Allow` (`PUT, DELETE`).
    public static func methodNotAllowed(allowed: String) -> PushAPIError {
        let methods = allowed.replacingOccurrences(of: ", ", with: " or ")
        return PushAPIError(.invalidParameters, status: 405, detail: "method must be \(methods)")
    }
    public static func tooManyRequests(retryAfter: Int) -> PushAPIError {
        PushAPIError(.tooManyRequests, retryAfter: max(retryAfter, 1))
    }

    /// `1001 Invalid parameters: token must be hex`.
    public var text: String {
        "\(code.rawValue) \(code.message)" + (detail.map { ": " + $0 } ?? "")
    }

    public var description: String { "push API error \(status) \(text)" }

    public var response: HTTPResponse {
        var headers = HTTPHeaders()
        if let retryAfter { headers.add("Retry-After", String(retryAfter)) }
        if status == 401 { headers.add("WWW-Authenticate", "Bearer") }
        return .json(status, "{\"error\": " + JSONString.quote(text) + "}", headers: headers)
    }
}
