import Foundation
import Shared

/// The operator's admin API under `/admin/v1`, served on its own listener
/// (`ADMIN_LISTEN`) and guarded by a bearer token (`ADMIN_TOKEN`).
///
/// JSON in and out (camelCase); errors are `{"error":{"code":"…","message":"…"}}`
/// with 400 (invalid request), 401 (token), 404 (no such thing or route), 405,
/// 409 (conflict), 422 (refused: plan, credential, team) or 502 (APNs could not
/// be asked). The `X-Actor` header (default `admin`) names who made a change in
/// the activity log. Request bodies are never logged.
public struct AdminAPI: HTTPHandler {
    static let prefix = "/admin/v1"

    private let tokenHash: [UInt8]
    private let routes: [AdminRoute]
    private let logger: Logger
    /// Requests refused for their token: any client can send them, so a line now and
    /// then (with how many were left out), not one each.
    private let refusedLog: ThrottledLog
    /// How long a request waits on storage: as long as Postgres answers (work may
    /// rightly run long), then 503 `storage_unavailable`.
    private let liveness: PostgresLiveness

    init(token: String, dependencies: AdminDependencies, liveness: PostgresLiveness) {
        tokenHash = SHA256.hash(token)
        self.liveness = liveness
        logger = dependencies.logger
        refusedLog = ThrottledLog(logger: dependencies.logger, interval: .seconds(60))
        routes =
            AccountsController(dependencies: dependencies).routes
            + CredentialsController(dependencies: dependencies).routes
            + AppsController(dependencies: dependencies).routes
            + APIKeysController(dependencies: dependencies).routes
            + UsersController(dependencies: dependencies).routes
            + ActivityController(dependencies: dependencies).routes
    }

    /// The admin API: credentials probed with `probe` (APNs production), ingress caches
    /// invalidated through `invalidator` (a failure tried again for
    /// `invalidationRetryWindow`), live quota counts read from `quota`; requests
    /// answered 503 once Postgres stops answering `liveness`'s probes.
    init(
        token: String, postgres: PostgresClient, liveness: PostgresLiveness, sealer: PushCredentialSealer,
        probe: any CredentialProbe, invalidator: any CacheInvalidator, quota: any QuotaCounter = NoQuotaCounter(),
        logger: Logger, invalidationRetryWindow: Duration = .seconds(300),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.init(
            token: token,
            dependencies: AdminDependencies(
                postgres: postgres, sealer: sealer, probe: probe, invalidator: invalidator, quota: quota,
                logger: logger, now: now, invalidationLog: InvalidationRetryLog(logger: logger),
                invalidationRetryWindow: invalidationRetryWindow),
            liveness: liveness)
    }

    public func maximumBodySize(for head: HTTPRequestHead) -> Int { 64 * 1024 }

    public func bodyTooLarge(_ head: HTTPRequestHead) -> HTTPResponse {
        AdminResponse.error(AdminError(413, "body_too_large", "the request body is over 64 KiB"))
    }

    public func rejected(_ head: HTTPRequestHead, _ rejection: HTTPHeadRejection) -> HTTPResponse {
        let code =
            switch rejection {
            case .targetTooLong: "uri_too_long"
            case .fieldsTooLarge: "headers_too_large"
            case .missingHost, .contentLengthWithTransferEncoding, .conflictingContentLengths, .malformedField,
                .invalidHost, .transferCodingInHTTP10, .repeatedAuthorization:
                "invalid_request"
            case .unsupportedTransferCoding: "not_implemented"
            }
        return AdminResponse.error(AdminError(rejection.status, code, rejection.reason))
    }

    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let response = await answer(request)
        if response.status == 401 {
            // No actor: an unauthenticated `X-Actor` is whatever the client claims.
            refusedLog.warning(
                "admin requests refused: token missing or wrong",
                metadata: ["method": request.method, "path": request.path])
            return response
        }
        logger.info(
            "admin request",
            metadata: [
                "method": request.method, "path": request.path, "status": "\(response.status)",
                "actor": Self.actor(request.headers) ?? "-",
            ])
        return response
    }

    private func answer(_ request: HTTPRequest) async -> HTTPResponse {
        guard isAuthorized(request.headers["Authorization"]) else {
            var response = AdminResponse.error(.unauthorized)
            response.headers.add("WWW-Authenticate", "Bearer realm=\"pushgate-admin\"")
            return response
        }
        guard let actor = Self.actor(request.headers) else {
            return AdminResponse.error(.invalid("X-Actor must be 1 to 100 printable characters"))
        }
        guard request.path == Self.prefix || request.path.hasPrefix(Self.prefix + "/") else {
            return AdminResponse.error(.routeNotFound(request))
        }
        guard let segments = Self.segments(of: request.path) else {
            return AdminResponse.error(.routeNotFound(request))
        }
        var allowed: [String] = []  // methods of the routes whose path matches
        for route in routes {
            guard let parameters = route.match(segments) else { continue }
            // HEAD wherever GET is (RFC 9110 §9.1): libmicrohttpd leaves out the body.
            guard route.method == request.method || (route.method == "GET" && request.method == "HEAD") else {
                allowed.append(route.method)
                if route.method == "GET" { allowed.append("HEAD") }
                continue
            }
            do {
                let (handler, adminRequest) = (
                    route.handler, AdminRequest(http: request, parameters: parameters, actor: actor)
                )
                // A frozen Postgres (or a network dropping everything) would otherwise hold
                // the request as long as it lasts; the work goes on, and a change may still commit.
                return try await liveness.value(of: Task { try await handler(adminRequest) })
            } catch let error as AdminError {
                return AdminResponse.error(error)
            } catch let error as PostgresError where error.code == .invalidParameter {
                // A value no field check caught (a NUL in an id): the request's fault.
                return AdminResponse.error(.invalid("a value holds a character that cannot be stored"))
            } catch {
                logger.error(
                    "admin request failed",
                    metadata: ["method": request.method, "path": request.path, "error": "\(error)"])
                // Postgres or Redis out of reach (or their pools exhausted): try again later.
                if StorageFailure.isOutage(error) {
                    return AdminResponse.error(
                        AdminError(503, "storage_unavailable", "the database or Redis cannot be reached; try again"))
                }
                return AdminResponse.error(AdminError(500, "internal", "the request failed; see the service log"))
            }
        }
        if !allowed.isEmpty {
            var response = AdminResponse.error(
                AdminError(405, "method_not_allowed", "\(request.method) is not allowed on \(request.path)"))
            response.headers.add("Allow", allowed.joined(separator: ", "))  // RFC 9110 §15.5.6
            return response
        }
        return AdminResponse.error(.routeNotFound(request))
    }

    /// The path's segments after the prefix; one trailing slash is allowed. nil when
    /// one is empty (`/users//ban`, or an id that was `%2F`, which libmicrohttpd has
    /// decoded already): collapsed, it would name another resource (`/users/ban`).
    static func segments(of path: String) -> [String]? {
        var segments = path.dropFirst(prefix.count).split(separator: "/", omittingEmptySubsequences: false)
        if segments.first?.isEmpty == true { segments.removeFirst() }
        if segments.last?.isEmpty == true { segments.removeLast() }
        guard !segments.contains(where: \.isEmpty) else { return nil }
        return segments.map(String.init)
    }

    /// Constant-time comparison of the token's SHA-256 (so neither length nor content leaks).
    private func isAuthorized(_ header: String?) -> Bool {
        guard let header, header.count > 7, header.prefix(7).lowercased() == "bearer " else { return false }
        let token = header.dropFirst(7).trimmingCharacters(in: .whitespaces)
        return ConstantTime.equals(SHA256.hash(token), tokenHash)
    }

    /// `X-Actor`, default `admin`; nil when it is unusable.
    static func actor(_ headers: HTTPHeaders) -> String? {
        guard let value = headers["X-Actor"]?.trimmingCharacters(in: .whitespaces) else { return "admin" }
        guard (1...100).contains(value.count),
            // Controls (C0, DEL, C1), and U+FFFD: bytes that were not UTF-8.
            !value.unicodeScalars.contains(where: {
                $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || $0 == "\u{FFFD}"
            })
        else { return nil }
        return value
    }
}
