import Shared

/// The public API's `HTTPHandler`: routes each request, applies the body limits
/// (8 KB for Web Push, a full batch for App API sends, 64 KB for other JSON), turns
/// errors into the spec's error bodies and records the request metrics.
/// A class so the per-request closures retain one reference, not every field.
final class IngressHandler: HTTPHandler {
    static let jsonBodyLimit = 64 * 1024

    let device: DeviceRoutes
    let webPush: WebPushRoutes
    let health: HealthRoutes
    let appAPI: AppAPIRoutes
    let clientIP: ClientIPResolver
    let metrics: IngressMetrics
    let failureLog: ThrottledLog

    init(
        device: DeviceRoutes, webPush: WebPushRoutes, health: HealthRoutes, appAPI: AppAPIRoutes,
        clientIP: ClientIPResolver,
        metrics: IngressMetrics, failureLog: ThrottledLog
    ) {
        self.device = device
        self.webPush = webPush
        self.health = health
        self.appAPI = appAPI
        self.clientIP = clientIP
        self.metrics = metrics
        self.failureLog = failureLog
    }

    func maximumBodySize(for head: HTTPRequestHead) -> Int {
        // A push is told apart without building its route (and the id's string).
        if Route.isDelivery(method: head.method, path: head.path) { return WebPushRoutes.bodyLimit(head) }
        return Route(method: head.method, path: head.path) == .appSend ? SendBatch.maximumBodyBytes : Self.jsonBodyLimit
    }

    func bodyTooLarge(_ head: HTTPRequestHead) -> HTTPResponse {
        response(to: head, push: .tooLarge, app: .tooLarge)
    }

    /// An error in its API's format: the App API's under its prefix, the spec's elsewhere.
    private func response(to head: HTTPRequestHead, push: PushAPIError, app: AppAPIError) -> HTTPResponse {
        Route.isAppAPI(head.path) ? app.response : push.response
    }

    /// Cut off by a shutdown: the push may or may not be queued, so never a 201;
    /// a 503 (1005) tells the sender to retry.
    /// Also counted like any answer: a 5xx alert must see these 503s too.
    func unavailable(_ head: HTTPRequestHead) -> HTTPResponse {
        let error = PushAPIError.storageUnavailable
        let answer = response(to: head, push: error, app: .unavailable)
        recordRefusal(head, answer, pushError: error)
        return answer
    }

    func rejected(_ head: HTTPRequestHead, _ rejection: HTTPHeadRejection) -> HTTPResponse {
        let pushError = PushAPIError(.invalidParameters, status: rejection.status, detail: rejection.reason)
        let answer = response(
            to: head, push: pushError, app: AppAPIError(status: rejection.status, message: rejection.reason))
        recordRefusal(head, answer, pushError: pushError)
        return answer
    }

    /// An answer given before any route ran: the request counts, and a push's
    /// refusal counts among the pushes by code.
    private func recordRefusal(_ head: HTTPRequestHead, _ response: HTTPResponse, pushError: PushAPIError) {
        let route = Route(method: head.method, path: head.path)
        record(route, response, since: .now)
        if case .deliver = route { metrics.pushRejected(pushError) }
    }

    func handleOversized(_ head: HTTPRequestHead) async -> HTTPResponse {
        let start = ContinuousClock.now
        let route = Route(method: head.method, path: head.path)
        let response: HTTPResponse
        switch route {
        case .deliver(let id):
            response = await webPush.oversized(head, id: id)
        case .register, .update, .pending, .activate, .delete:
            let client = clientIP.clientKey(head)
            response = await deviceAnswer { [device] in
                try await device.oversized(registration: route == .register, client: client)
            }
        default:
            response = bodyTooLarge(head)
        }
        record(route, response, since: start)
        return response
    }

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let start = ContinuousClock.now
        let route = Route(method: request.method, path: request.path)
        let response = await respond(route, request)
        record(route, response, since: start)
        return response
    }

    /// Web Push deliveries answer from the Redis reply's thread, without a task;
    /// everything else runs `handle(_:)` in a task.
    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let start = ContinuousClock.now
        let route = Route(method: request.method, path: request.path)
        guard case .deliver(let id) = route else {
            Task { respond(await handle(request)) }
            return
        }
        webPush.deliver(request, id: id) { [self] response in
            record(route, response, since: start)
            respond(response)
        }
    }

    private func respond(_ route: Route, _ request: HTTPRequest) async -> HTTPResponse {
        switch route {
        case .deliver(let id): return await webPush.deliver(request, id: id)
        case .healthz: return health.healthz()
        case .readyz: return await health.readyz(request)
        case .metrics: return health.metricsText()
        case .appBind, .appUnbind, .appDevices, .appSend: return await appAPI.respond(route, request)
        case .notFound, .methodNotAllowed: return unroutable(route, path: request.path)
        default: break
        }
        let client = clientIP.clientKey(request.head)
        return await deviceAnswer { [device] in
            switch route {
            case .register: return try await device.register(request, client: client)
            case .update(let id): return try await device.update(request, id: id, client: client)
            case .pending(let id): return try await device.pending(request, id: id, client: client)
            case .activate(let id): return try await device.activate(request, id: id, client: client)
            case .delete(let id): return try await device.delete(request, id: id, client: client)
            default: return PushAPIError.noSuchEndpoint.response
            }
        }
    }

    /// A device endpoint's answer: `body`'s, or its error in the spec's format; 503
    /// (1005) once it has waited `DeviceRoutes.storageWait` on storage that does not
    /// answer (a frozen Postgres, a lock, a network dropping everything). Without the
    /// limit such requests, and their connections, wait as long as the storage does:
    /// clients that gave up and retried would fill the connection cap, and pushes
    /// would be refused with them. The work goes on after the 503 (a write may
    /// still commit); every device request is safe to repeat, and a registration
    /// the client never learnt of stays pending until the sweep.
    private func deviceAnswer(_ body: @escaping @Sendable () async throws -> HTTPResponse) async -> HTTPResponse {
        do {
            return try await withTimeLimit(DeviceRoutes.storageWait, body)
        } catch {
            if StorageFailure.isStorageError(error) {
                failureLog.warning("device request failed: storage error", error: error)
            }
            return StorageFailure.apiError(for: error).response
        }
    }

    /// 404 for a path without a route, 405 (with `Allow`) for a method the path does not
    /// take: in the App API's error format under its prefix, in the spec's everywhere else.
    private func unroutable(_ route: Route, path: String) -> HTTPResponse {
        if Route.isAppAPI(path) {
            guard case .methodNotAllowed(let allowed) = route else { return .json(404, #"{"error": "not found"}"#) }
            return .json(405, #"{"error": "method not allowed"}"#, headers: HTTPHeaders([("Allow", allowed)]))
        }
        guard case .methodNotAllowed(let allowed) = route else { return PushAPIError.noSuchEndpoint.response }
        var response = PushAPIError.methodNotAllowed(allowed: allowed).response
        response.headers.add("Allow", allowed)
        return response
    }

    private func record(_ route: Route, _ response: HTTPResponse, since start: ContinuousClock.Instant) {
        if case .deliver = route, response.status == 201 {
            metrics.deliverCreated.increment()
            metrics.deliverLatency.observe(since: start)
            return
        }
        let label = route.label
        metrics.requests.increment(by: 1, label, String(response.status))
        metrics.latency.observe(since: start, [label])
    }
}
