import Synchronization

/// `/readyz` for a service that needs Redis and Postgres: 200 when both answer
/// within two seconds, 503 naming the one that does not. `/readyz?exclude=postgres`
/// (the API server's convention in Kubernetes) asks only for Redis, the one the
/// per-push path needs: pushes to known devices are still accepted and delivered
/// while Postgres is away, so a load balancer's probe must not take every ingress
/// out of service for it. The body names both either way; an excluded Postgres is
/// given half a second, not two: a silent one must not hold the probe past the
/// balancer's own timeout (Kubernetes's default is one second).
///
/// An answer is reused for `reuseFor` (1 s), and callers that ask while a probe is
/// under way share it: `/readyz` is reachable by anyone on the public port, and a
/// flood of probes must not take the pools' connections from the requests.
public final class ReadinessCheck: Sendable {
    public let redis: RedisClient
    public let postgres: PostgresClient
    private let reuseFor: Duration
    /// By whether Postgres is required: the probe under way, or the last answer.
    private let recent = Mutex<[Bool: Answer]>([:])

    private enum Answer {
        case pending(Task<HTTPResponse, Never>)
        case ready(HTTPResponse, at: ContinuousClock.Instant)
    }

    public init(redis: RedisClient, postgres: PostgresClient, reuseFor: Duration = .seconds(1)) {
        self.redis = redis
        self.postgres = postgres
        self.reuseFor = reuseFor
    }

    /// The answer to `request` (its query may exclude Postgres).
    public func response(to request: HTTPRequest) async -> HTTPResponse {
        let excludesPostgres = request.head.query.contains { $0.name == "exclude" && $0.value == "postgres" }
        return await response(requiringPostgres: !excludesPostgres)
    }

    public func response(requiringPostgres: Bool = true) async -> HTTPResponse {
        let now = ContinuousClock.now
        let answer = recent.withLock { recent -> Answer in
            switch recent[requiringPostgres] {
            case .ready(let response, let at) where now - at < reuseFor: return .ready(response, at: at)
            case .pending(let task): return .pending(task)
            default:
                let task = Task { [self] in
                    let response = await probe(requiringPostgres: requiringPostgres)
                    self.recent.withLock { $0[requiringPostgres] = .ready(response, at: .now) }
                    return response
                }
                recent[requiringPostgres] = .pending(task)
                return .pending(task)
            }
        }
        switch answer {
        case .ready(let response, _): return response
        case .pending(let task): return await task.value
        }
    }

    private func probe(requiringPostgres: Bool) async -> HTTPResponse {
        let (redis, postgres) = (redis, postgres)
        async let redisUp = Self.answers(within: .seconds(2)) { try await redis.send("PING") == .status("PONG") }
        async let postgresUp = Self.answers(within: requiringPostgres ? .seconds(2) : .milliseconds(500)) {
            try await postgres.query("SELECT 1").count == 1
        }
        let (redisOK, postgresOK) = await (redisUp, postgresUp)
        let body = "{\"redis\":\"\(redisOK ? "ok" : "down")\",\"postgres\":\"\(postgresOK ? "ok" : "down")\"}"
        return .json(redisOK && (postgresOK || !requiringPostgres) ? 200 : 503, body)
    }

    /// Bounded: a server that does not answer within `limit` counts as down. The probe
    /// is not awaited past that (a task group would wait for it: a silent server holds
    /// a query up to the connect timeout); it ends on its client's own timeouts.
    private static func answers(
        within limit: Duration, _ probe: @escaping @Sendable () async throws -> Bool
    ) async -> Bool {
        let answer = FirstAnswer()
        return await withCheckedContinuation { continuation in
            answer.hold(continuation)
            Task { answer.give((try? await probe()) ?? false) }
            Task {
                try? await Task.sleep(for: limit)
                answer.give(false)
            }
        }
    }
}

/// The first of several answers, handed to one waiting continuation; later ones are dropped.
private final class FirstAnswer: Sendable {
    private let continuation = Mutex<CheckedContinuation<Bool, Never>?>(nil)

    func hold(_ waiting: CheckedContinuation<Bool, Never>) {
        continuation.withLock { $0 = waiting }
    }

    func give(_ answer: Bool) {
        continuation.withLock { waiting in
            defer { waiting = nil }
            return waiting
        }?.resume(returning: answer)
    }
}
