import Shared

/// An error the admin API answers with: an HTTP status, a stable snake_case code
/// and an English message, sent as `{"error":{"code":"…","message":"…"}}`.
/// Messages never contain key material or SQL.
struct AdminError: Error, Sendable, Equatable, CustomStringConvertible {
    let status: Int
    let code: String
    let message: String

    init(_ status: Int, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    var description: String { "\(status) \(code): \(message)" }

    static func invalid(_ message: String) -> AdminError { AdminError(400, "invalid_request", message) }
    static func routeNotFound(_ request: HTTPRequest) -> AdminError {
        AdminError(404, "route_not_found", "no admin route \(request.method) \(request.path)")
    }

    static func notFound(_ what: String, _ id: String) -> AdminError {
        AdminError(404, "not_found", "\(what) \(id) not found")
    }

    static let unauthorized = AdminError(401, "unauthorized", "a valid admin bearer token is required")

    static func unprocessable(_ code: String, _ message: String) -> AdminError { AdminError(422, code, message) }

    static func conflict(_ code: String, _ message: String) -> AdminError { AdminError(409, code, message) }

    static func apnsUnavailable(_ message: String) -> AdminError { AdminError(502, "apns_unavailable", message) }
}
