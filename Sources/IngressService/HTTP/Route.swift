/// The public API's routes, matched from method and path (`/api/push/…`).
enum Route: Sendable, Equatable {
    case healthz, readyz, metrics
    case register
    case update(id: String)
    case pending(id: String)
    case activate(id: String)
    case delete(id: String)
    case deliver(id: String)
    /// The path exists but not with this method.
    case methodNotAllowed(allowed: String)
    case notFound

    static let subscriptionsPath = "/api/push/v1/subscriptions"
    static let pushPathPrefix = "/api/push/p/"

    init(method: String, path: String) {
        switch path {
        case "/healthz": self = method == "GET" ? .healthz : .methodNotAllowed(allowed: "GET")
        case "/readyz": self = method == "GET" ? .readyz : .methodNotAllowed(allowed: "GET")
        case "/metrics": self = method == "GET" ? .metrics : .methodNotAllowed(allowed: "GET")
        case Self.subscriptionsPath: self = method == "POST" ? .register : .methodNotAllowed(allowed: "POST")
        default:
            if path.hasPrefix(Self.pushPathPrefix) {
                let id = String(path.dropFirst(Self.pushPathPrefix.count))
                // Any other shape is answered by the route itself (404, 1003).
                guard !id.isEmpty else {
                    self = .notFound
                    return
                }
                self = method == "POST" ? .deliver(id: id) : .methodNotAllowed(allowed: "POST")
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
                case (2, "pending", "GET"): self = .pending(id: id)
                case (2, "pending", _): self = .methodNotAllowed(allowed: "GET")
                case (2, "activate", "POST"): self = .activate(id: id)
                case (2, "activate", _): self = .methodNotAllowed(allowed: "POST")
                default: self = .notFound
                }
            } else {
                self = .notFound
            }
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
        case .methodNotAllowed: "method not allowed"
        case .notFound: "not found"
        }
    }
}
