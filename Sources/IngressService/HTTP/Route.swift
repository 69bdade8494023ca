import Foundation

/// The public API's routes, matched from method and path (`/api/push/…`).
enum Route: Sendable, Equatable {
    case healthz, readyz, metrics
    case register
    case update(id: String)
    case pending(id: String)
    case activate(id: String)
    case delete(id: String)
    case deliver(id: String)
    // The App API (`/api/v1/app/push/…`).
    case appBind
    case appUnbind(id: String)
    case appDevices(userID: String)
    case appSend
    /// The path exists but not with this method.
    case methodNotAllowed(allowed: String)
    case notFound

    static let subscriptionsPath = "/api/push/v1/subscriptions"
    static let pushPathPrefix = "/api/push/p/"
    static let appAPIPrefix = "/api/v1/app/push/"

    /// Whether `path` is under the App API, whose errors have a format of their own.
    static func isAppAPI(_ path: String) -> Bool { path.hasPrefix(appAPIPrefix) }

    init(method: String, path: String) {
        // One trailing slash names the same resource: a sender or app that adds it
        // must not be told its subscription is gone (404, 1003).
        // The hot path first, compared as bytes (no Character walk, no copy of the path).
        if let id = Self.pushID(in: path) {
            // Any other shape is answered by the route itself (404, 1003).
            if id.isEmpty {
                self = .notFound
            } else {
                self = method == "POST" ? .deliver(id: String(Substring(id))) : .methodNotAllowed(allowed: "POST")
            }
            return
        }
        let path = path.utf8.count > 1 && path.utf8.last == UInt8(ascii: "/") ? String(path.dropLast()) : path
        switch path {
        // HEAD wherever GET is (RFC 9110 §9.1; some load balancers probe with HEAD):
        // libmicrohttpd sends a HEAD's headers without the body.
        case "/healthz": self = Self.isRead(method) ? .healthz : .methodNotAllowed(allowed: "GET, HEAD")
        case "/readyz": self = Self.isRead(method) ? .readyz : .methodNotAllowed(allowed: "GET, HEAD")
        case "/metrics": self = Self.isRead(method) ? .metrics : .methodNotAllowed(allowed: "GET, HEAD")
        case Self.subscriptionsPath: self = method == "POST" ? .register : .methodNotAllowed(allowed: "POST")
        default:
            if Self.isAppAPI(path) {
                self = Self.appAPI(method: method, rest: path.dropFirst(Self.appAPIPrefix.count))
            } else if path.hasPrefix(Self.subscriptionsPath + "/") {
                let rest = path.dropFirst(Self.subscriptionsPath.count + 1).split(
                    separator: "/", omittingEmptySubsequences: false)
                let id = rest.first.map(String.init) ?? ""
                guard !id.isEmpty else {
                    self = .notFound
                    return
                }
                switch (rest.count, rest.count == 2 ? rest[1] : "", method) {
                case (1, _, "PUT"): self = .update(id: id)
                case (1, _, "DELETE"): self = .delete(id: id)
                case (1, _, _): self = .methodNotAllowed(allowed: "PUT, DELETE")
                case (2, "pending", "GET"), (2, "pending", "HEAD"): self = .pending(id: id)
                case (2, "pending", _): self = .methodNotAllowed(allowed: "GET, HEAD")
                case (2, "activate", "POST"): self = .activate(id: id)
                case (2, "activate", _): self = .methodNotAllowed(allowed: "POST")
                default: self = .notFound
                }
            } else {
                self = .notFound
            }
        }
    }

    private static func isRead(_ method: String) -> Bool { method == "GET" || method == "HEAD" }

    /// Whether this is a Web Push delivery (`.deliver`), decided without building the
    /// route's id: the body limit is chosen before every push.
    static func isDelivery(method: String, path: String) -> Bool {
        method == "POST" && pushID(in: path)?.isEmpty == false
    }

    /// The id part of a push path (`/api/push/p/{id}`, one trailing slash dropped), a
    /// view of `path`'s bytes; nil for any other path.
    private static func pushID(in path: String) -> Substring.UTF8View? {
        let prefix = pushPathPrefix.utf8
        var bytes = Substring(path).utf8
        guard bytes.count >= prefix.count, Self.startsWithPushPrefix(bytes) else { return nil }
        if bytes.count > 1, bytes.last == UInt8(ascii: "/") { bytes = bytes.dropLast() }
        guard bytes.count >= prefix.count else { return nil }
        return bytes.dropFirst(prefix.count)
    }

    /// `bytes.starts(with: pushPathPrefix.utf8)` over contiguous storage (the generic
    /// one walks both views index by index).
    private static func startsWithPushPrefix(_ bytes: Substring.UTF8View) -> Bool {
        let prefix = pushPathPrefix.utf8
        let answer = bytes.withContiguousStorageIfAvailable { bytes in
            prefix.withContiguousStorageIfAvailable { prefix in
                memcmp(bytes.baseAddress!, prefix.baseAddress!, prefix.count) == 0
            }
        }
        return (answer ?? nil) ?? bytes.starts(with: prefix)
    }

    private static func appAPI(method: String, rest: Substring) -> Route {
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        switch parts.count {
        case 1 where parts[0] == "send": return method == "POST" ? .appSend : .methodNotAllowed(allowed: "POST")
        case 2 where parts == ["subscriptions", "bind"]:
            return method == "POST" ? .appBind : .methodNotAllowed(allowed: "POST")
        case 3 where parts[0] == "subscriptions" && parts[2] == "bind" && !parts[1].isEmpty:
            return method == "DELETE" ? .appUnbind(id: parts[1]) : .methodNotAllowed(allowed: "DELETE")
        case 3 where parts[0] == "users" && parts[2] == "devices" && !parts[1].isEmpty:
            return isRead(method) ? .appDevices(userID: parts[1]) : .methodNotAllowed(allowed: "GET, HEAD")
        default: return .notFound
        }
    }

    /// The metrics label: the route's template, never an id.
    var label: String {
        switch self {
        case .healthz: "/healthz"
        case .readyz: "/readyz"
        case .metrics: "/metrics"
        case .register: "POST /v1/subscriptions"
        case .update: "PUT /v1/subscriptions/{id}"
        case .pending: "GET /v1/subscriptions/{id}/pending"
        case .activate: "POST /v1/subscriptions/{id}/activate"
        case .delete: "DELETE /v1/subscriptions/{id}"
        case .deliver: "POST /p/{id}"
        case .appBind: "POST /v1/app/push/subscriptions/bind"
        case .appUnbind: "DELETE /v1/app/push/subscriptions/{id}/bind"
        case .appDevices: "GET /v1/app/push/users/{userId}/devices"
        case .appSend: "POST /v1/app/push/send"
        case .methodNotAllowed: "method not allowed"
        case .notFound: "not found"
        }
    }
}
