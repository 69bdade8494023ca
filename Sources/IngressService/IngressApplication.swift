import Foundation
import Shared
import Synchronization

/// The assembled ingress: the public HTTP server over the routes, the Redis and
/// Postgres clients, the metrics and the stale-subscription sweep. `main` builds
/// it from the environment; tests build the same thing on port 0.
final class IngressApplication: Sendable {
    let configuration: IngressConfiguration
    let server: HTTPServer
    let redis: RedisClient
    /// The App API's waits for outcomes (`APP_API_REPLY_CONNECTIONS`), apart from `redis`.
    let replyRedis: RedisClient
    /// The Web Push hot path's pipelined connection (everything else uses the pool).
    let hotPath: RedisMultiplexer
    /// The thread that runs the public HTTP server and `hotPath` together, when
    /// `INGRESS_THREADS` is 1; stopped last.
    let frontLoop: EventLoop?
    let postgres: PostgresClient
    /// The cache fills' connections (`DATABASE_FILL_CONNECTIONS`), apart from `postgres`.
    let fillPostgres: PostgresClient
    /// The admin API's connections (`ADMIN_DATABASE_CONNECTIONS`), apart from both.
    let adminPostgres: PostgresClient
    /// One connection for asking whether Postgres answers while admin work waits
    /// (`PostgresLiveness`), apart from every pool that work or a flood may take up.
    let livenessPostgres: PostgresClient
    let keys: RedisKeys
    let metrics: IngressMetrics
    let sweeper: SubscriptionSweeper
    let stashExpiry: StashExpiry
    let invalidation: CacheInvalidation
    /// The admin API's own listener (`ADMIN_LISTEN`); nil when it is off.
    let adminServer: HTTPServer?
    /// `/readyz`; also asked once at start, so a schema older than this build is logged then.
    let readiness: ReadinessCheck
    /// Set when shutdown begins: App API sends stop waiting for outcomes (`ReplyCollector`).
    let stopping: StopFlag
    let logger: Logger
    private let sweepTask = Mutex<Task<Void, Never>?>(nil)
    private let stashExpiryTask = Mutex<Task<Void, Never>?>(nil)

    init(
        configuration: IngressConfiguration, server: HTTPServer, redis: RedisClient, replyRedis: RedisClient,
        hotPath: RedisMultiplexer, postgres: PostgresClient, fillPostgres: PostgresClient,
        adminPostgres: PostgresClient, livenessPostgres: PostgresClient, keys: RedisKeys, metrics: IngressMetrics,
        sweeper: SubscriptionSweeper,
        stashExpiry: StashExpiry,
        invalidation: CacheInvalidation, readiness: ReadinessCheck, stopping: StopFlag,
        adminServer: HTTPServer? = nil, frontLoop: EventLoop? = nil, logger: Logger
    ) {
        self.stopping = stopping
        self.frontLoop = frontLoop
        self.configuration = configuration
        self.server = server
        self.redis = redis
        self.replyRedis = replyRedis
        self.hotPath = hotPath
        self.postgres = postgres
        self.fillPostgres = fillPostgres
        self.adminPostgres = adminPostgres
        self.livenessPostgres = livenessPostgres
        self.keys = keys
        self.metrics = metrics
        self.sweeper = sweeper
        self.stashExpiry = stashExpiry
        self.invalidation = invalidation
        self.adminServer = adminServer
        self.readiness = readiness
        self.logger = logger
    }

    /// The bound port (useful with port 0).
    var port: Int { server.port }

    /// Starts listening, the removal of expired stashed messages and, when `sweep` is
    /// set, the periodic sweep.
    func start(sweep: Bool = true) throws(HTTPServerError) {
        try server.start()
        try adminServer?.start()
        Task { [readiness] in _ = await readiness.schemaIsBehind() }
        let stashExpiry = self.stashExpiry
        stashExpiryTask.withLock { $0 = Task { await stashExpiry.run() } }
        if sweep {
            let sweeper = self.sweeper
            sweepTask.withLock { $0 = Task { await sweeper.run() } }
        }
    }

    /// Stops accepting, finishes requests in flight (up to `deadline`), stops the
    /// sweep and closes the pools.
    func shutdown(deadline: Duration = .seconds(10)) async {
        stopping.set()
        async let admin: Void? = adminServer?.shutdown(deadline: deadline)
        await server.shutdown(deadline: deadline)
        _ = await admin
        sweepTask.withLock { task in
            task?.cancel()
            task = nil
        }
        // Waited for: a run cut off by the pool's closing would log a warning.
        let stashExpiryRun = stashExpiryTask.withLock { task in
            defer { task = nil }
            task?.cancel()
            return task
        }
        await stashExpiryRun?.value
        redis.close()
        replyRedis.close()
        hotPath.close()
        postgres.close()
        fillPostgres.close()
        adminPostgres.close()
        livenessPostgres.close()
        frontLoop?.shutdown()
    }
}

/// Assembles the ingress from its configuration. `keys` overrides the Redis key
/// layout (tests isolate themselves with their own namespace and stream).
func buildApplication(
    configuration: IngressConfiguration, logger: Logger, keys: RedisKeys? = nil
) throws -> IngressApplication {
    let keys = keys ?? RedisKeys(stream: configuration.queueStream)
    func redisPool(connections: Int, acquireTimeout: Duration) throws -> RedisClient {
        try RedisClient(
            url: configuration.common.redisURL,
            options: .init(
                maximumConnections: connections, acquireTimeout: acquireTimeout,
                connection: .init(connectTimeout: .seconds(2), commandTimeout: .seconds(2))),
            logger: logger)
    }
    let redis = try redisPool(connections: configuration.redisConnections, acquireTimeout: .seconds(2))
    // App API sends block on their reply lists (BLPOP, a second at a time) on
    // connections of their own; one that cannot get one soon stops waiting.
    let replyRedis = try redisPool(
        connections: configuration.appAPIReplyConnections, acquireTimeout: .milliseconds(500))
    let stopping = StopFlag()
    // One thread: libmicrohttpd runs on the loop that reads the hot path's Redis
    // replies, so a push is parsed, sent, answered and written without a thread
    // hand-off. With more threads, libmicrohttpd's own pool hands each push to the
    // multiplexer's thread and back.
    let frontLoop = configuration.threads == 1 ? EventLoop(name: "pushgate.ingress") : nil
    let hotPath = RedisMultiplexer(
        url: redis.url, options: .init(connectTimeout: .seconds(2), commandTimeout: .seconds(2)),
        eventLoop: frontLoop, logger: logger)
    /// A pool of Postgres connections, each opened on first use, named in `pg_stat_activity`.
    func postgresPool(_ name: String, connections: Int) -> PostgresClient {
        PostgresClient(
            configuration: .init(
                url: configuration.common.databaseURL, applicationName: name, maximumConnections: connections,
                acquireTimeout: .seconds(5), connectTimeout: 5))
    }
    let postgres = postgresPool("pushgate-ingress", connections: configuration.databaseConnections)
    // The hot path's cache fills read Postgres over connections of their own: a flood
    // of pushes to unknown push URLs (each read once, then answered from a minute's
    // negative entry) then waits on these, not on the connections that registrations,
    // /readyz and the admin API need.
    let fillPostgres = postgresPool("pushgate-ingress-fill", connections: configuration.databaseFillConnections)
    // The admin API's own: its work may rightly run long (an account deleted with
    // millions of subscriptions, requests waiting on a lock), and must not take the
    // connections registrations and /readyz need meanwhile.
    let adminPostgres = postgresPool("pushgate-ingress-admin", connections: configuration.adminDatabaseConnections)
    // Whether Postgres answers is asked over a connection no other work uses: on the
    // fills' pool, taken up by a flood of pushes to unknown URLs, a live server looked
    // silent and long admin work was answered 503.
    let livenessPostgres = postgresPool("pushgate-ingress-liveness", connections: 1)
    let metrics = IngressMetrics()
    let subscriptions = SubscriptionRepository(postgres: postgres)
    let directory = AppDirectory(postgres: postgres)
    let invalidation = CacheInvalidation(
        redis: redis, keys: keys, tombstoneLifetimeSeconds: configuration.common.tombstoneLifetimeSeconds)
    // One throttle per API: a storm of failed pushes must not hide failing device or
    // App API requests (and each `suppressed` count stays that API's own).
    let (pushFailures, deviceFailures, appAPIFailures) =
        (ThrottledLog(logger: logger), ThrottledLog(logger: logger), ThrottledLog(logger: logger))
    let stashLifetime = Int64(configuration.stashLifetimeSeconds) * 1000
    var base = configuration.publicBaseURL.absoluteString
    while base.hasSuffix("/") { base.removeLast() }

    var limiter = SlidingWindowLimiter(
        redis: redis, keys: keys, registration: configuration.registrationRateLimit,
        device: configuration.deviceRateLimit)
    limiter.appAPI = configuration.appAPIRateLimit
    limiter.unknownPush = configuration.unknownPushRateLimit
    limiter.appAPIKeyFailures = configuration.appAPIKeyFailureRateLimit
    let clientIP = ClientIPResolver(trustedProxies: configuration.trustedProxies)
    let cache = HotPathCache(
        redis: redis, keys: keys, subscriptions: SubscriptionRepository(postgres: fillPostgres),
        directory: AppDirectory(postgres: fillPostgres),
        lifetimeMilliseconds: Int64(configuration.cacheLifetimeSeconds) * 1000,
        staleLifetimeMilliseconds: Int64(configuration.cacheStaleLifetimeSeconds) * 1000,
        staleLog: ThrottledLog(logger: logger, interval: .seconds(60)),
        refreshFailureCount: metrics.cacheRefreshFailures)
    let appRepository = AppAPIRepository(postgres: postgres)
    let appAPI = AppAPIRoutes(
        authenticator: AppAPIAuthenticator(keys: AppAPIKeyStore(postgres: postgres)), repository: appRepository,
        limiter: limiter,
        keyLookups: FailedLookupLimit(limiter: limiter, scope: .appAPIKeyFailures, clientIP: clientIP),
        validKeys: RecentlyValidKeys(),
        sender: AppAPISender(
            repository: appRepository, redis: redis, keys: keys, cache: cache,
            replies: ReplyCollector(redis: replyRedis, stopping: stopping),
            maximumTTLSeconds: configuration.maximumPushTTLSeconds,
            deadline: .milliseconds(configuration.appAPISendDeadlineMilliseconds), metrics: metrics),
        failureLog: appAPIFailures)
    let device = DeviceRoutes(
        subscriptions: subscriptions, directory: directory,
        limiter: limiter,
        invalidation: invalidation, cache: cache, redis: redis, keys: keys, publicPushBase: base + Route.pushPathPrefix,
        stashLifetimeMilliseconds: stashLifetime,
        invalidationRetryWindow: .seconds(configuration.cacheLifetimeSeconds), logger: logger.child("device"),
        invalidationLog: InvalidationRetryLog(logger: logger.child("device")))
    let webPush = WebPushRoutes(
        hotPath: hotPath, keys: keys, scriptEncoder: HotPathScript.Encoder(keys: keys),
        cache: cache, unknownPushes: FailedLookupLimit(limiter: limiter, scope: .unknownPush, clientIP: clientIP),
        metrics: metrics, pushRateLimit: configuration.pushRateLimit, stashLimit: configuration.stashLimit,
        stashLifetimeMilliseconds: stashLifetime, maximumTTL: configuration.maximumPushTTLSeconds,
        messageBase: base + "/api/push/m/", failureLog: pushFailures)
    let readiness = ReadinessCheck(
        redis: redis, postgres: postgres, logger: logger.child("readiness"),
        postgresUsers: "registrations, device updates, App API sends and the admin API")
    let handler = IngressHandler(
        device: device, webPush: webPush, health: HealthRoutes(readiness: readiness, metrics: metrics),
        appAPI: appAPI,
        clientIP: clientIP, metrics: metrics,
        failureLog: deviceFailures)
    let server = HTTPServer(
        configuration: .init(
            address: configuration.listen, threads: configuration.threads,
            connectionLimit: configuration.connectionLimit, connectionsPerIP: configuration.connectionsPerIP,
            connectionTimeoutSeconds: configuration.connectionTimeoutSeconds,
            bodyMemoryLimit: configuration.bodyMemoryMegabytes << 20, eventLoop: frontLoop),
        handler: handler, logger: logger.child("http"))
    // Weak: the server reaches the registry through its handler.
    metrics.registry.sampledGauge(
        "pushgate_ingress_open_connections",
        help: "Client connections open; at INGRESS_CONNECTION_LIMIT new ones wait in the listen backlog."
    ) { [weak server] in Double(server?.openConnections ?? 0) }
    metrics.registry.sampledGauge(
        "pushgate_ingress_requests_in_flight",
        help: "Requests whose head arrived and whose answer has not gone out (bodies arriving, handlers working)."
    ) { [weak server] in Double(server?.requestsInFlight ?? 0) }
    metrics.registry.sampledGauge(
        "pushgate_ingress_body_memory_bytes",
        help: "Memory held by request bodies still arriving; at INGRESS_BODY_MEMORY_MB requests answer 503."
    ) { [weak server] in Double(server?.heldBodyBytes ?? 0) }
    let sweeper = SubscriptionSweeper(
        redis: redis, keys: keys, subscriptions: subscriptions, invalidation: invalidation,
        maximumAgeSeconds: configuration.subscriptionMaximumAgeSeconds,
        interval: .seconds(configuration.sweepIntervalSeconds),
        invalidationRetryWindow: .seconds(configuration.cacheLifetimeSeconds), swept: metrics.sweptSubscriptions,
        logger: logger.child("sweep"))
    let stashExpiry = StashExpiry(
        redis: redis, keys: keys, lifetimeMilliseconds: stashLifetime, interval: .seconds(1),
        logger: logger.child("stash"))
    let adminServer: HTTPServer?
    do {
        adminServer = try AdminAPI.makeServer(
            configuration: configuration, postgres: adminPostgres,
            liveness: PostgresLiveness(postgres: livenessPostgres),
            probe: APNsCredentialProbe(configuration: configuration.common, logger: logger.child("admin")),
            invalidator: RedisCacheInvalidator(invalidation: invalidation),
            quota: RedisQuotaCounter(redis: redis, keys: keys), logger: logger)
    } catch {
        hotPath.close()  // its event loop thread would otherwise outlive the failed start
        frontLoop?.shutdown()
        throw error
    }
    return IngressApplication(
        configuration: configuration, server: server, redis: redis, replyRedis: replyRedis, hotPath: hotPath,
        postgres: postgres, fillPostgres: fillPostgres, adminPostgres: adminPostgres,
        livenessPostgres: livenessPostgres, keys: keys, metrics: metrics,
        sweeper: sweeper,
        stashExpiry: stashExpiry, invalidation: invalidation, readiness: readiness, stopping: stopping,
        adminServer: adminServer,
        frontLoop: frontLoop, logger: logger)
}
