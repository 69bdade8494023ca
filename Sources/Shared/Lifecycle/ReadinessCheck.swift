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
///
/// A database whose schema is older than this build's queries need (a version rolled
/// out before its migrations ran) answers 503 `"postgres":"schema_behind"`, excluded
/// or not: the process would fail requests that reach those queries, so it must take
/// no traffic until `migrate` has run. That is logged once, as an error, with both
/// versions; once the schema is seen current it is not read again (it never goes back).
public final class ReadinessCheck: Sendable {
    public let redis: RedisClient
    public let postgres: PostgresClient
    /// The schema version this build needs: the newest migration it knows.
    public let requiredSchemaVersion: Int
    private let reuseFor: Duration
    private let logger: Logger?
    /// What fails while Postgres does not answer, for the log line that says so.
    private let postgresUsers: String
    /// By whether Postgres is required: the probe under way, or the last answer.
    private let recent = Mutex<[Bool: Answer]>([:])
    /// What the probes have seen of the schema.
    private let schema = Mutex(SchemaSeen.unknown)

    private enum SchemaSeen {
        case unknown
        case behind
        case current
    }

    /// Postgres as a probe finds it; the raw value is what `/readyz` says.
    private enum PostgresState: String, Sendable {
        case ok
        case down
        case schemaBehind = "schema_behind"
    }

    private enum Answer {
        case pending(Task<HTTPResponse, Never>)
        case ready(HTTPResponse, at: ContinuousClock.Instant)
    }

    public init(
        redis: RedisClient, postgres: PostgresClient, reuseFor: Duration = .seconds(1),
        requiredSchemaVersion: Int = Migrations.newestVersion, logger: Logger? = nil,
        postgresUsers: String = "queries"
    ) {
        self.redis = redis
        self.postgres = postgres
        self.reuseFor = reuseFor
        self.postgresUsers = postgresUsers
        self.requiredSchemaVersion = requiredSchemaVersion
        self.logger = logger
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
        let redis = redis
        async let redisUp = Self.answer(within: .seconds(2), otherwise: false) {
            try await redis.send("PING") == .status("PONG")
        }
        async let postgresState = Self.answer(
            within: requiringPostgres ? .seconds(2) : .milliseconds(500), otherwise: PostgresState.down
        ) { [self] in try await probePostgres() }
        let (redisOK, database) = await (redisUp, postgresState)
        let postgresOK =
            switch database {
            case .ok: true
            case .down: !requiringPostgres
            case .schemaBehind: false
            }
        let body = "{\"redis\":\"\(redisOK ? "ok" : "down")\",\"postgres\":\"\(database.rawValue)\"}"
        return .json(redisOK && postgresOK ? 200 : 503, body)
    }

    /// Whether Postgres answered, within two seconds, that its schema is older than
    /// this build needs (logged once, as an error). False when it is current, and when
    /// Postgres cannot be asked: that is no reason to hold anything up, but it is
    /// logged (a warning, with why). It leaves the answers `/readyz` reuses alone, so a
    /// service can ask at start: an operator who runs no probes (or only Redis's, as the
    /// manifests do) learns of a missed `migrate` or an unreachable database too.
    public func schemaIsBehind() async -> Bool {
        let (state, problem, lasting) = await Self.answer(
            within: .seconds(2), otherwise: (PostgresState.down, "no answer within 2 s", false)
        ) { [self] () async throws -> (PostgresState, String?, Bool) in
            do {
                return (try await probePostgres(), nil, false)
            } catch let error as PostgresError
                where error.code == .connectionFailed && !MigrationCommand.isUnreachable(error)
            {
                return (.down, ThrottledLog.describe(error), true)
            } catch {
                return (.down, ThrottledLog.describe(error), false)
            }
        }
        if let problem, lasting {
            // A wrong password, role, database or option: no wait mends it, but a
            // rotated password or a database created late might, so the service stays up.
            logger?.error(
                "Postgres refuses this service's connection (check DATABASE_URL); \(postgresUsers) fail until it accepts",
                metadata: ["error": problem])
        } else if let problem {
            logger?.warning(
                "Postgres does not answer; \(postgresUsers) fail until it does",
                metadata: ["error": problem])
        }
        return state == .schemaBehind
    }

    /// Whether Postgres answers and, until it was seen current, its schema version.
    private func probePostgres() async throws -> PostgresState {
        if schema.withLock({ $0 == .current }) {
            return try await postgres.query("SELECT 1").count == 1 ? .ok : .down
        }
        let version: Int
        do {
            let rows = try await postgres.query("SELECT coalesce(max(version), 0) AS version FROM schema_migrations")
            version = try rows.first?.decode("version", as: Int.self) ?? 0
        } catch let error as PostgresError where error.isUndefinedTable {
            version = 0  // never migrated
        }
        let current = version >= requiredSchemaVersion
        let before = schema.withLock { seen in
            defer { seen = current ? .current : .behind }
            return seen
        }
        if !current && before != .behind {
            logger?.error(
                "database schema is older than this build needs; run migrate",
                metadata: ["schema.database": "\(version)", "schema.required": "\(requiredSchemaVersion)"])
        } else if current && before == .behind {
            logger?.notice("database schema is current", metadata: ["schema.database": "\(version)"])
        }
        return current ? .ok : .schemaBehind
    }

    /// Bounded: a server that does not answer within `limit` counts as `otherwise`
    /// (down), as does one that fails. The probe is not awaited past that (a task
    /// group would wait for it: a silent server holds a query up to the connect
    /// timeout); it ends on its client's own timeouts.
    private static func answer<Value: Sendable>(
        within limit: Duration, otherwise fallback: Value, _ probe: @escaping @Sendable () async throws -> Value
    ) async -> Value {
        let answer = FirstAnswer<Value>()
        return await withCheckedContinuation { continuation in
            answer.hold(continuation)
            Task { answer.give((try? await probe()) ?? fallback) }
            Task {
                try? await Task.sleep(for: limit)
                answer.give(fallback)
            }
        }
    }
}

/// The first of several answers, handed to one waiting continuation; later ones are dropped.
private final class FirstAnswer<Value: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<Value, Never>?>(nil)

    func hold(_ waiting: CheckedContinuation<Value, Never>) {
        continuation.withLock { $0 = waiting }
    }

    func give(_ answer: Value) {
        continuation.withLock { waiting in
            defer { waiting = nil }
            return waiting
        }?.resume(returning: answer)
    }
}
