import Foundation

/// Settings both services read.
///
/// Environment variables:
/// - `DATABASE_URL` (required): libpq connection string or `postgresql://` URL.
/// - `REDIS_URL` (required): `redis://[:password@]host:port[/db]`.
/// - `CREDENTIAL_KEY` (required): 32 bytes, base64; seals `.p8` keys at rest.
/// - `APNS_PRODUCTION_URL`, `APNS_SANDBOX_URL`: default Apple's hosts.
/// - `APNS_CA_FILE`: extra CA bundle to trust, PEM (verification is never switched off).
/// - `LOG_LEVEL`: debug, info (default), notice, warning, error.
/// - `TOMBSTONE_TTL_SECONDS`: how long a subscription whose device token died
///   answers 410 instead of 404, default 2592000 (30 days).
public struct CommonConfiguration: Sendable {
    public var databaseURL: String
    public var redisURL: String
    /// The raw 32-byte key for AES-256-GCM. Never logged.
    public var credentialKey: [UInt8]
    public var apnsProductionURL: URL
    public var apnsSandboxURL: URL
    public var apnsCAFile: String?
    public var logLevel: Logger.Level
    public var tombstoneLifetimeSeconds: Int

    public init(environment: Environment) throws(ConfigurationError) {
        databaseURL = try Self.databaseURL(environment)
        redisURL = try environment.required("REDIS_URL")
        do {
            _ = try RedisURL(redisURL)
        } catch {
            // RedisURL's messages already name the variable: "REDIS_URL must start with redis://".
            let problem = error.message.hasPrefix("REDIS_URL ") ? String(error.message.dropFirst(10)) : error.message
            throw ConfigurationError(variable: "REDIS_URL", problem: problem)
        }
        let keyText = try environment.required("CREDENTIAL_KEY")
        guard let key = Data(base64Encoded: keyText), key.count == 32 else {
            throw ConfigurationError(variable: "CREDENTIAL_KEY", problem: "must be exactly 32 bytes, base64-encoded")
        }
        credentialKey = Array(key)
        apnsProductionURL = try environment.httpsURL("APNS_PRODUCTION_URL", default: "https://api.push.apple.com")
        apnsSandboxURL = try environment.httpsURL("APNS_SANDBOX_URL", default: "https://api.sandbox.push.apple.com")
        apnsCAFile = try environment.readableFile("APNS_CA_FILE")
        // A file that holds no certificate would only fail at the first TLS handshake,
        // as an APNs outage (every send retried, the circuit raised); one OpenSSL cannot
        // load fails the worker's start and every credential probe. Both are told here,
        // loading it as the APNs client will.
        if let apnsCAFile {
            guard FileManager.default.contents(atPath: apnsCAFile).map(Self.holdsPEMCertificate) ?? false else {
                throw ConfigurationError(
                    variable: "APNS_CA_FILE", problem: "holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
            }
            do {
                _ = try TLSContext.client(extraCAFile: apnsCAFile, alpn: [])
            } catch {
                throw ConfigurationError(variable: "APNS_CA_FILE", problem: "is not a valid PEM CA bundle (\(error))")
            }
        }
        logLevel = try Self.logLevel(environment)
        tombstoneLifetimeSeconds = try environment.integer(
            "TOMBSTONE_TTL_SECONDS", default: CacheInvalidation.defaultTombstoneLifetimeSeconds,
            range: 1...3650 * 86_400)
    }

    /// `DATABASE_URL`, which libpq must be able to parse (`migrate` reads it alone).
    public static func databaseURL(_ environment: Environment) throws(ConfigurationError) -> String {
        let url = try environment.required("DATABASE_URL")
        guard PostgresConnection.isValidConnectionString(url) else {
            // The value is not echoed: it holds the password.
            throw ConfigurationError(
                variable: "DATABASE_URL",
                problem:
                    "is not a libpq connection string or postgresql:// URL (percent-encode special characters; a port is 1 to 65535; sslmode is disable, allow, prefer, require, verify-ca or verify-full; connect_timeout and the keepalives options are whole numbers; TLS versions are TLSv1 to TLSv1.3)"
            )
        }
        return url
    }

    /// `MIGRATE_WAIT_SECONDS`: how long `migrate` waits for a Postgres that does not
    /// answer yet, default 60.
    public static func migrateWaitSeconds(_ environment: Environment) throws(ConfigurationError) -> Int {
        try environment.integer("MIGRATE_WAIT_SECONDS", default: 60, range: 0...3600)
    }

    static func holdsPEMCertificate(_ contents: Data) -> Bool {
        String(decoding: contents, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----")
    }

    static func logLevel(_ environment: Environment) throws(ConfigurationError) -> Logger.Level {
        guard let name = environment.optional("LOG_LEVEL") else { return .info }
        guard let level = Logger.Level(name: name) else {
            throw ConfigurationError(
                variable: "LOG_LEVEL", problem: "must be one of debug, info, notice, warning, error")
        }
        return level
    }
}

/// The ingress service's settings.
///
/// Environment variables, beyond `CommonConfiguration`'s:
/// - `INGRESS_LISTEN`: public API `host:port`, default `127.0.0.1:8080`.
/// - `ADMIN_LISTEN`: admin API `host:port`; the admin API is off when unset.
/// - `ADMIN_TOKEN`: bearer token of the admin API, at least 32 characters; required with `ADMIN_LISTEN`.
/// - `PUBLIC_BASE_URL` (required): base of the push `url` returned at registration.
/// - `TRUSTED_PROXIES`: comma-separated CIDRs whose `X-Forwarded-For` is believed.
/// - `INGRESS_THREADS`: HTTP threads, default 1 (1–64): one runs libmicrohttpd and the Web Push
///   hot path's Redis connection on one event loop (no thread hand-off per push); more run
///   libmicrohttpd's own thread pool, handing pushes to the Redis thread and back.
/// - `INGRESS_CONNECTION_LIMIT`: open connections at most, default 10000.
/// - `INGRESS_CONNECTION_TIMEOUT`: seconds a connection may go without sending
///   anything (idle, or a stalled request) before it is closed, default 30.
/// - `INGRESS_BODY_MEMORY_MB`: request bodies held while they arrive, all connections
///   together, in MiB, default 256; past it requests answer 503 (1005).
/// - `QUEUE_STREAM`: the stream pushes are added to, default `pushgate:queue:{0}`; its
///   `{…}` hash tag is used by every other key (`RedisKeys`).
/// - `RATE_LIMIT_REGISTRATION`: per client IP, `limit/seconds`, default `20/3600`.
/// - `RATE_LIMIT_DEVICE`: other device endpoints per client IP, default `120/60`.
/// - `RATE_LIMIT_PUSH`: Web Push deliveries per subscription, default `120/60`.
/// - `STASH_MAX_MESSAGES`: pending stash size per subscription, default 5.
/// - `STASH_TTL_SECONDS`: lifetime of a stashed message, default 1800, at most 1800
///   (the spec promises stashed ciphertext is discarded after 30 minutes).
/// - `PUSH_TTL_MAX_SECONDS`: the largest Web Push `TTL` kept (larger ones are capped
///   and the kept value echoed), default 2419200 (28 days).
/// - `CACHE_TTL_SECONDS`: lifetime of the Redis copies of subscriptions, apps and
///   accounts, default 300: older ones are read again from Postgres.
/// - `CACHE_STALE_TTL_SECONDS`: how long past that a copy is kept, to be used only
///   while Postgres cannot be read, default 3600 (0: not kept).
/// - `SUBSCRIPTION_MAX_AGE_SECONDS`: subscriptions not refreshed for this long are
///   hard-deleted, default 5184000 (60 days).
/// - `SWEEP_INTERVAL_SECONDS`: how often one replica runs that sweep, default 3600.
/// - `REDIS_CONNECTIONS`, `DATABASE_CONNECTIONS`: pool sizes, default 16 and 10.
/// - `DATABASE_FILL_CONNECTIONS`, `ADMIN_DATABASE_CONNECTIONS`: the cache fills' and the
///   admin API's Postgres pools, apart from that one, default 4 each.
/// - `APP_API_REPLY_CONNECTIONS`: Redis connections App API sends wait for outcomes
///   on, a pool of their own, default 8: sends waiting on workers that do not answer
///   must not hold the connections every other route (and `/readyz`) needs. A send
///   that finds them all busy answers `queued` for the messages still waiting.
public struct IngressConfiguration: Sendable {
    public var common: CommonConfiguration
    public var listen: ListenAddress
    public var adminListen: ListenAddress?
    public var adminToken: String?
    public var publicBaseURL: URL
    public var trustedProxies: [CIDR]
    public var threads: Int
    public var connectionLimit: Int
    /// Connections one client address may hold (`INGRESS_CONNECTIONS_PER_IP`, 0: no limit).
    public var connectionsPerIP: Int
    public var connectionTimeoutSeconds: Int
    public var bodyMemoryMegabytes: Int
    public var queueStream: String
    public var registrationRateLimit: RateLimit
    public var deviceRateLimit: RateLimit
    public var pushRateLimit: RateLimit
    /// The App API's per-app window, shared by all its endpoints (`RATE_LIMIT_APP_API`).
    public var appAPIRateLimit: RateLimit
    /// Web Pushes per client IP to push URLs neither Redis nor Postgres knows (`RATE_LIMIT_UNKNOWN_PUSH`).
    public var unknownPushRateLimit: RateLimit
    /// App API requests per client IP with a key that is not valid (`RATE_LIMIT_APP_API_KEY_FAILURES`).
    public var appAPIKeyFailureRateLimit: RateLimit
    /// How long `POST /api/v1/app/push/send` waits for the workers' outcomes (`APP_API_SEND_DEADLINE_MS`).
    public var appAPISendDeadlineMilliseconds: Int
    public var stashLimit: Int
    public var stashLifetimeSeconds: Int
    public var maximumPushTTLSeconds: Int
    public var cacheLifetimeSeconds: Int
    public var cacheStaleLifetimeSeconds: Int
    public var subscriptionMaximumAgeSeconds: Int
    public var sweepIntervalSeconds: Int
    public var redisConnections: Int
    public var appAPIReplyConnections: Int
    public var databaseConnections: Int
    /// Postgres connections of the hot path's cache fills (`DATABASE_FILL_CONNECTIONS`),
    /// apart from `databaseConnections`.
    public var databaseFillConnections: Int
    /// Postgres connections of the admin API (`ADMIN_DATABASE_CONNECTIONS`), apart
    /// from the others: its work may rightly run long.
    public var adminDatabaseConnections: Int

    public init(environment: Environment = Environment()) throws(ConfigurationError) {
        common = try CommonConfiguration(environment: environment)
        threads = try environment.integer("INGRESS_THREADS", default: 1, range: 1...64)
        connectionLimit = try environment.integer("INGRESS_CONNECTION_LIMIT", default: 10_000, range: 1...1_000_000)
        connectionsPerIP = try environment.integer("INGRESS_CONNECTIONS_PER_IP", default: 0, range: 0...1_000_000)
        connectionTimeoutSeconds = try environment.integer("INGRESS_CONNECTION_TIMEOUT", default: 30, range: 1...3600)
        bodyMemoryMegabytes = try environment.integer("INGRESS_BODY_MEMORY_MB", default: 256, range: 1...65_536)
        queueStream = try WorkerConfiguration.taggedStream(
            environment.optional("QUEUE_STREAM") ?? WorkerConfiguration.defaultStream, variable: "QUEUE_STREAM")
        registrationRateLimit = try environment.rateLimit(
            "RATE_LIMIT_REGISTRATION", default: RateLimit(limit: 20, windowSeconds: 3600))
        deviceRateLimit = try environment.rateLimit(
            "RATE_LIMIT_DEVICE", default: RateLimit(limit: 120, windowSeconds: 60))
        pushRateLimit = try environment.rateLimit("RATE_LIMIT_PUSH", default: RateLimit(limit: 120, windowSeconds: 60))
        appAPIRateLimit = try environment.rateLimit(
            "RATE_LIMIT_APP_API", default: RateLimit(limit: 600, windowSeconds: 60))
        unknownPushRateLimit = try environment.rateLimit(
            "RATE_LIMIT_UNKNOWN_PUSH", default: RateLimit(limit: 600, windowSeconds: 60))
        appAPIKeyFailureRateLimit = try environment.rateLimit(
            "RATE_LIMIT_APP_API_KEY_FAILURES", default: RateLimit(limit: 60, windowSeconds: 60))
        appAPISendDeadlineMilliseconds = try environment.integer(
            "APP_API_SEND_DEADLINE_MS", default: 10_000, range: 1...120_000)
        stashLimit = try environment.integer("STASH_MAX_MESSAGES", default: 5, range: 1...100)
        stashLifetimeSeconds = try environment.integer("STASH_TTL_SECONDS", default: 1800, range: 1...1800)
        maximumPushTTLSeconds = try environment.integer(
            "PUSH_TTL_MAX_SECONDS", default: 2_419_200, range: 0...31_536_000)
        cacheLifetimeSeconds = try environment.integer("CACHE_TTL_SECONDS", default: 300, range: 1...86_400)
        cacheStaleLifetimeSeconds = try environment.integer(
            "CACHE_STALE_TTL_SECONDS", default: 3600, range: 0...7 * 86_400)
        subscriptionMaximumAgeSeconds = try environment.integer(
            "SUBSCRIPTION_MAX_AGE_SECONDS", default: 60 * 86_400, range: 1...3650 * 86_400)
        sweepIntervalSeconds = try environment.integer("SWEEP_INTERVAL_SECONDS", default: 3600, range: 1...86_400)
        redisConnections = try environment.integer("REDIS_CONNECTIONS", default: 16, range: 1...1024)
        appAPIReplyConnections = try environment.integer("APP_API_REPLY_CONNECTIONS", default: 8, range: 1...1024)
        databaseConnections = try environment.integer("DATABASE_CONNECTIONS", default: 10, range: 1...1024)
        databaseFillConnections = try environment.integer("DATABASE_FILL_CONNECTIONS", default: 4, range: 1...1024)
        adminDatabaseConnections = try environment.integer("ADMIN_DATABASE_CONNECTIONS", default: 4, range: 1...1024)
        listen = try environment.listenAddress("INGRESS_LISTEN") ?? ListenAddress(host: "127.0.0.1", port: 8080)
        adminListen = try environment.listenAddress("ADMIN_LISTEN")
        adminToken = environment.optional("ADMIN_TOKEN")
        if adminListen != nil {
            guard let token = adminToken else {
                throw ConfigurationError(variable: "ADMIN_TOKEN", problem: "is required when ADMIN_LISTEN is set")
            }
            guard token.count >= 32 else {
                throw ConfigurationError(variable: "ADMIN_TOKEN", problem: "must be at least 32 characters")
            }
        }
        let base = try environment.required("PUBLIC_BASE_URL")
        guard let url = URL(string: base), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
            url.host?.isEmpty == false,
            url.query == nil, url.fragment == nil, url.user == nil, url.password == nil,
            url.port.map({ (1...65535).contains($0) }) ?? true
        else {
            throw ConfigurationError(
                variable: "PUBLIC_BASE_URL",
                problem:
                    "must be an http(s):// URL with a host (a port of 1–65535 if any) and no query, fragment or user")
        }
        // The spec calls `https://host/api/push` the device endpoints' base URL; given
        // here, every push url would be `…/api/push/api/push/p/{id}`, which nothing serves.
        var path = url.path
        while path.hasSuffix("/") { path.removeLast() }
        if path.lowercased().hasSuffix("/api/push") {
            throw ConfigurationError(
                variable: "PUBLIC_BASE_URL",
                problem:
                    "must not end in /api/push: it is the URL the ingress is reached at, and /api/push/p/{id} is added to it"
            )
        }
        publicBaseURL = url
        trustedProxies = try Self.cidrs(environment.optional("TRUSTED_PROXIES"))
    }

    static func cidrs(_ text: String?) throws(ConfigurationError) -> [CIDR] {
        guard let text else { return [] }
        var result: [CIDR] = []
        for part in text.split(separator: ",") {
            let item = part.trimmingCharacters(in: .whitespaces)
            guard let cidr = CIDR(item) else {
                throw ConfigurationError(variable: "TRUSTED_PROXIES", problem: "has an invalid CIDR \"\(item)\"")
            }
            result.append(cidr)
        }
        return result
    }
}

/// The dispatch worker's settings.
///
/// Environment variables, beyond `CommonConfiguration`'s:
/// - `WORKER_ID`: consumer name in the queue's consumer group; unique among live
///   workers, and best kept across a restart (what a worker left pending under it is
///   taken back at once, `QueueConsumer`). The default, `<hostname>-<pid>-<random>`,
///   is new at every start: containers sharing a host's network share its hostname,
///   and each may be pid 1.
/// - `WORKER_STREAMS`: comma-separated queue streams to read, default `pushgate:queue:{0}`.
/// - `APNS_CONNECTIONS`: HTTP/2 connections per (credential, environment) pool, default 4.
/// - `METRICS_LISTEN`: `/metrics`, `/healthz`, `/readyz`, default `127.0.0.1:9091`.
/// - `WORKER_BATCH_SIZE`: messages read per `XREADGROUP` at most (as entries of up to
///   `HotPathScript.maximumBatch` messages), default 256 (1–10000).
/// - `WORKER_MAX_IN_FLIGHT`: messages one process works on at once (read, not yet
///   acknowledged), default 2000 (1–100000).
/// - `WORKER_MAX_IN_FLIGHT_PER_DESTINATION`: of those, how many may be on their way
///   to one credential in one APNs environment at once until its prompt answers widen
///   that (up to `WORKER_MAX_IN_FLIGHT`; `DestinationSlots`), default half of
///   `WORKER_MAX_IN_FLIGHT` (at most it): one app's slow or unreachable APNs cannot
///   hold up the others'; its messages past the bound wait in the delayed-retry set.
/// - `WORKER_READ_LINGER_MS`: under load (a read of many messages that emptied the
///   stream), how long to wait before the next read so that it takes more at once,
///   default 5 (0–100; 0: read again at once). Light load is read at once regardless.
/// - `WORKER_VISIBILITY_TIMEOUT`: seconds an entry may stay unacknowledged before
///   another worker claims it, default 60 (1–3600). Keep it above the APNs request
///   timeout (15 s): another worker takes an entry held longer and sends it again
///   (its own worker never takes it back while sending it).
/// - `WORKER_MAX_DELIVERIES`: times an entry may be handed out (read or claimed)
///   without an outcome before it goes to the dead-letter stream, default 5 (2–100).
/// - `WORKER_MAX_ATTEMPTS`: APNs attempts per message for 429/5xx/connection
///   failures before it fails with provider_error, default 20 (1–100): with the
///   default delays, 6.5–13 minutes of retries, so an accepted message outlives an
///   APNs outage of that length (the circuit flag turns new pushes away meanwhile).
/// - `WORKER_RETRY_BASE_MS`, `WORKER_RETRY_CAP_MS`: retry delay before attempt n+1 is
///   `min(cap, base·2^(n−1))`, half of it fixed and half random (jitter); defaults
///   500 and 60000.
/// - `WORKER_SHUTDOWN_TIMEOUT`: seconds SIGTERM waits for in-flight sends, default 30.
/// - `WORKER_CIRCUIT_THRESHOLD`: consecutive sends for one credential/environment that
///   fail for reasons that are not the message's (connection, timeout, 5xx) before the
///   circuit flag is raised, default 20 (1–100000).
/// - `WORKER_CIRCUIT_TTL`: seconds the circuit flag lives unless renewed, default 30.
/// - `REPLY_TTL_SECONDS`: lifetime of a reply list after each outcome pushed, default 60.
/// - `DEAD_LETTER_TTL_SECONDS`: how long a dead letter (an entry's fields, device
///   token and ciphertext included) is kept for inspection or replay, default 86400
///   (a day; 60–31536000): a record of individual sends must not outlive its use.
/// - `REDIS_CONNECTIONS`, `DATABASE_CONNECTIONS`: pool sizes, default 16 and 4.
public struct WorkerConfiguration: Sendable {
    public static let defaultStream = "pushgate:queue:{0}"

    public var common: CommonConfiguration
    public var workerID: String
    public var streams: [String]
    public var apnsConnections: Int
    public var metricsListen: ListenAddress
    public var batchSize: Int
    public var maxInFlight: Int
    public var maxInFlightPerDestination: Int
    public var readLingerMilliseconds: Int
    public var visibilityTimeoutSeconds: Int
    public var maxDeliveries: Int
    public var maxAttempts: Int
    public var retryBaseMilliseconds: Int
    public var retryCapMilliseconds: Int
    public var shutdownTimeoutSeconds: Int
    public var circuitThreshold: Int
    public var circuitLifetimeSeconds: Int
    public var replyLifetimeSeconds: Int
    public var deadLetterLifetimeSeconds: Int
    public var redisConnections: Int
    public var databaseConnections: Int

    public init(environment: Environment = Environment()) throws(ConfigurationError) {
        common = try CommonConfiguration(environment: environment)
        batchSize = try environment.integer("WORKER_BATCH_SIZE", default: 256, range: 1...10_000)
        maxInFlight = try environment.integer("WORKER_MAX_IN_FLIGHT", default: 2000, range: 1...100_000)
        maxInFlightPerDestination = try environment.integer(
            "WORKER_MAX_IN_FLIGHT_PER_DESTINATION", default: max(1, maxInFlight / 2), range: 1...maxInFlight)
        readLingerMilliseconds = try environment.integer("WORKER_READ_LINGER_MS", default: 5, range: 0...100)
        visibilityTimeoutSeconds = try environment.integer("WORKER_VISIBILITY_TIMEOUT", default: 60, range: 1...3600)
        maxDeliveries = try environment.integer("WORKER_MAX_DELIVERIES", default: 5, range: 2...100)
        maxAttempts = try environment.integer("WORKER_MAX_ATTEMPTS", default: 20, range: 1...100)
        retryBaseMilliseconds = try environment.integer("WORKER_RETRY_BASE_MS", default: 500, range: 1...3_600_000)
        retryCapMilliseconds = try environment.integer("WORKER_RETRY_CAP_MS", default: 60_000, range: 1...86_400_000)
        guard retryCapMilliseconds >= retryBaseMilliseconds else {
            throw ConfigurationError(
                variable: "WORKER_RETRY_CAP_MS",
                problem: "must be at least WORKER_RETRY_BASE_MS (\(retryBaseMilliseconds))")
        }
        shutdownTimeoutSeconds = try environment.integer("WORKER_SHUTDOWN_TIMEOUT", default: 30, range: 0...3600)
        circuitThreshold = try environment.integer("WORKER_CIRCUIT_THRESHOLD", default: 20, range: 1...100_000)
        circuitLifetimeSeconds = try environment.integer("WORKER_CIRCUIT_TTL", default: 30, range: 1...3600)
        replyLifetimeSeconds = try environment.integer("REPLY_TTL_SECONDS", default: 60, range: 1...86_400)
        deadLetterLifetimeSeconds = try environment.integer(
            "DEAD_LETTER_TTL_SECONDS", default: 86_400, range: 60...31_536_000)
        redisConnections = try environment.integer("REDIS_CONNECTIONS", default: 16, range: 2...1024)
        databaseConnections = try environment.integer("DATABASE_CONNECTIONS", default: 4, range: 1...1024)
        workerID =
            environment.optional("WORKER_ID")
            ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(String(format: "%08x", UInt32.random(in: 0...UInt32.max)))"
        guard workerID.allSatisfy({ !$0.isWhitespace }) else {
            throw ConfigurationError(variable: "WORKER_ID", problem: "must not contain spaces")
        }
        streams = try Self.streams(in: environment)
        apnsConnections = try environment.integer("APNS_CONNECTIONS", default: 4, range: 1...64)
        metricsListen = try environment.listenAddress("METRICS_LISTEN") ?? ListenAddress(host: "127.0.0.1", port: 9091)
    }

    /// `WORKER_STREAMS`: comma-separated queue streams (default `defaultStream`), at
    /// least one. Also read by `dispatch-worker replay-dead-letters`.
    public static func streams(in environment: Environment) throws(ConfigurationError) -> [String] {
        let streams = (environment.optional("WORKER_STREAMS") ?? defaultStream)
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !streams.isEmpty else {
            throw ConfigurationError(variable: "WORKER_STREAMS", problem: "must name at least one stream")
        }
        // Two readers of one stream under one consumer name would each take the other's
        // entries in flight for orphans and send them again.
        guard Set(streams).count == streams.count else {
            throw ConfigurationError(variable: "WORKER_STREAMS", problem: "names a stream more than once")
        }
        return try streams.map { (stream) throws(ConfigurationError) in
            try taggedStream(stream, variable: "WORKER_STREAMS")
        }
    }

    /// `stream`, if it has a `{…}` hash tag: every other key of its ingress carries the
    /// same one (`RedisKeys`), and a stream without one would stand apart from them.
    static func taggedStream(_ stream: String, variable: String) throws(ConfigurationError) -> String {
        guard RedisKeys.explicitHashTag(of: stream) != nil else {
            throw ConfigurationError(
                variable: variable,
                problem:
                    "\(stream) has no {hash tag}, e.g. pushgate:queue:{0}: every Redis key of its pushes carries it")
        }
        return stream
    }
}
