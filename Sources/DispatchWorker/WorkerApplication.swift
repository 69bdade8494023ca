import Foundation
import Shared
import Synchronization

/// The assembled dispatch worker: a consumer per queue stream, the APNs client,
/// the outcome writers and the operations listener. `main` builds it from the
/// environment; tests build the same thing in-process.
final class WorkerApplication: Sendable {
    let configuration: WorkerConfiguration
    let redis: RedisClient
    let postgres: PostgresClient
    /// The waited-message checks' connections (`RetriedSubscriptionCheck`).
    let checksPostgres: PostgresClient
    let apns: APNsClient
    let metrics: WorkerMetrics
    let limiter: InFlightLimiter
    let consumers: [QueueConsumer]
    let acknowledger: Acknowledger
    let counts: DailyCounts
    let circuit: CircuitBreaker
    let server: HTTPServer
    let gauges: QueueGauges
    /// `/readyz`; `start()` also asks it whether the schema is current.
    let readiness: ReadinessCheck
    let logger: Logger
    private let stopping: StopFlag
    private let gaugeTask = Mutex<Task<Void, Never>?>(nil)

    init(
        configuration: WorkerConfiguration, redis: RedisClient, postgres: PostgresClient,
        checksPostgres: PostgresClient, apns: APNsClient, metrics: WorkerMetrics, limiter: InFlightLimiter,
        consumers: [QueueConsumer], acknowledger: Acknowledger,
        counts: DailyCounts, circuit: CircuitBreaker, server: HTTPServer, gauges: QueueGauges,
        readiness: ReadinessCheck, stopping: StopFlag, logger: Logger
    ) {
        self.configuration = configuration
        self.redis = redis
        self.postgres = postgres
        self.checksPostgres = checksPostgres
        self.apns = apns
        self.metrics = metrics
        self.limiter = limiter
        self.consumers = consumers
        self.acknowledger = acknowledger
        self.counts = counts
        self.circuit = circuit
        self.server = server
        self.gauges = gauges
        self.readiness = readiness
        self.stopping = stopping
        self.logger = logger
    }

    /// The operations listener's port (useful with port 0).
    var metricsPort: Int { server.port }

    /// How often a worker started against an older schema looks again.
    static let schemaRecheckInterval = Duration.seconds(2)

    /// Starts the operations listener, the outcome writers and the consumers. Against
    /// a database whose schema is older than this build needs (rolled out before
    /// `migrate`), it consumes nothing until the schema is current: outcomes written
    /// with queries the schema cannot serve would fail. An unreachable Postgres is not
    /// waited for: pushes to known devices are delivered without it.
    func start() async throws {
        try server.start()
        // The queue gauges from the start: a worker waiting for `migrate` still shows
        // the queue growing (the lag alert, the autoscaler).
        let (gauges, stopping) = (gauges, stopping)
        gaugeTask.withLock {
            $0 = Task { await gauges.run(every: .seconds(2)) { !stopping.isSet } }
        }
        while await readiness.schemaIsBehind() {
            try await Task.sleep(for: Self.schemaRecheckInterval)
        }
        acknowledger.start()
        counts.start()
        for consumer in consumers { await consumer.start() }
    }

    /// SIGTERM: stop reading and claiming, take down the circuit flags this worker
    /// holds (`CircuitBreaker.stop`), let in-flight messages finish and be
    /// acknowledged until `deadline`, then close the APNs connections (GOAWAY); sends
    /// that did not finish go back through the delayed-retry set for any worker, and
    /// what cannot be written (Redis gone) stays unacknowledged, for another worker
    /// to claim. Returns true when nothing was left behind.
    @discardableResult
    func shutdown(deadline: Duration = .seconds(30)) async -> Bool {
        guard stopping.set() else { return true }
        let end = ContinuousClock.now + deadline
        limiter.close()
        for consumer in consumers { await consumer.stop() }
        await circuit.stop()
        var drained = await limiter.drain(until: end)
        // Sends still waiting fail with `shutdown` and go back through the retry set.
        await apns.shutdown(deadline: drained ? .seconds(1) : .zero)
        if !drained {
            // The sends cut off go back through the retry set (any worker sends them);
            // only what is still held after that stays pending, for a claim.
            drained = await limiter.drain(until: .now + .seconds(2))
            if drained {
                logger.notice("stopped before every send finished; the unfinished ones were put back for retry")
            } else {
                logger.warning(
                    "stopping with messages unfinished; they stay pending, claimable",
                    metadata: ["in_flight": "\(limiter.inFlight)"])
            }
        }
        // Settled entries are written at once when Redis answers; a second of retries
        // bridges a blip, and past it what is left stays pending for another worker.
        await acknowledger.stop(retryingUntil: .now + .seconds(1))
        await counts.stop(waitingAtMost: .seconds(1))
        gaugeTask.withLock { $0?.cancel() }
        await server.shutdown(deadline: .seconds(1))
        redis.close()
        postgres.close()
        checksPostgres.close()
        return drained
    }
}

/// Assembles the worker from its configuration. `namespace` is the Redis key
/// namespace (tests isolate themselves with their own); `tokens` replaces the
/// provider token store (by default one token per credential shared by every
/// worker through Redis, `RedisProviderTokenStore`).
func buildWorker(
    configuration: WorkerConfiguration, logger: Logger, namespace: String = "pushgate",
    tokens: (any ProviderTokenStore)? = nil
) throws -> WorkerApplication {
    let redis = try RedisClient(
        url: configuration.common.redisURL,
        options: .init(
            maximumConnections: configuration.redisConnections + configuration.streams.count * 2,
            acquireTimeout: .seconds(5), connection: .init(connectTimeout: .seconds(2), commandTimeout: .seconds(5))),
        logger: logger)
    let postgres = PostgresClient(
        configuration: .init(
            url: configuration.common.databaseURL, applicationName: "pushgate-worker",
            maximumConnections: configuration.databaseConnections, acquireTimeout: .seconds(10), connectTimeout: 5))
    // The waited-message checks' own: two connections (a read of the revocations and a
    // lookup at a time), statements cancelled past the checks' limit.
    let checksPostgres = PostgresClient(
        configuration: .init(
            url: configuration.common.databaseURL, applicationName: "pushgate-worker-checks",
            maximumConnections: 2, acquireTimeout: RetriedSubscriptionCheck.readLimit, connectTimeout: 2,
            statementTimeout: RetriedSubscriptionCheck.readLimit))
    let apnsConfiguration = APNsClient.Configuration(worker: configuration)
    if .seconds(configuration.visibilityTimeoutSeconds) <= apnsConfiguration.requestTimeout {
        logger.warning(
            "WORKER_VISIBILITY_TIMEOUT is not above the APNs request timeout: another worker may claim and send again an entry still on its way",
            metadata: [
                "visibility_timeout_s": "\(configuration.visibilityTimeoutSeconds)",
                "apns_request_timeout_s": "\(apnsConfiguration.requestTimeout.components.seconds)",
            ])
    }
    let apns = try APNsClient(
        configuration: apnsConfiguration,
        tokens: tokens ?? RedisProviderTokenStore(redis: redis),
        logger: logger)
    let metrics = WorkerMetrics()
    let limiter = InFlightLimiter(limit: configuration.maxInFlight)
    let counts = DailyCounts(
        postgres: postgres,
        transfers: configuration.streams.map {
            CountTransfer(
                redis: redis, postgres: postgres, keys: RedisKeys(stream: $0, namespace: namespace),
                owner: configuration.workerID, lease: .seconds(10))
        },
        logger: logger.child("counts"))
    let acknowledger = Acknowledger(
        redis: redis, limiter: limiter, counts: counts, metrics: metrics,
        replyLifetimeSeconds: configuration.replyLifetimeSeconds, logger: logger.child("ack"))
    let circuit = CircuitBreaker(
        redis: redis, threshold: configuration.circuitThreshold, lifetimeSeconds: configuration.circuitLifetimeSeconds,
        logger: logger.child("circuit"), onRaise: { [metrics] in metrics.circuitRaised.increment() })
    let credentials = CredentialCache(
        reader: PushCredentialReader(
            postgres: postgres, sealer: try PushCredentialSealer(configuration: configuration.common)),
        logger: logger.child("credentials"))
    let recorder = OutcomeRecorder(
        redis: redis, acknowledger: acknowledger, limiter: limiter, circuit: circuit,
        credentials: credentials, remover: SubscriptionRemover(postgres: postgres),
        rejecter: CredentialRejecter(
            postgres: postgres, workerID: configuration.workerID, logger: logger.child("rejecter")),
        retryPolicy: RetryPolicy(
            maxAttempts: configuration.maxAttempts, baseMilliseconds: configuration.retryBaseMilliseconds,
            capMilliseconds: configuration.retryCapMilliseconds),
        metrics: metrics, operatorLog: OperatorLog(logger: logger.child("operator")), logger: logger.child("outcomes"),
        tombstoneLifetimeSeconds: configuration.common.tombstoneLifetimeSeconds,
        replyLifetimeSeconds: configuration.replyLifetimeSeconds,
        deadLetterLifetimeSeconds: configuration.deadLetterLifetimeSeconds)
    let processor = EntryProcessor(
        sender: MessageSender(
            apns: apns, credentials: credentials, configuration: configuration.common, metrics: metrics,
            destinations: DestinationSlots(
                limit: configuration.maxInFlightPerDestination, ceiling: configuration.maxInFlight)),
        recorder: recorder,
        retriedCheck: RetriedSubscriptionCheck(
            postgres: checksPostgres, checks: metrics.waitedChecks, logger: logger.child("retried_check")),
        topics: TopicSupersession(redis: redis, logger: logger.child("topics")),
        maxDeliveries: configuration.maxDeliveries,
        deadLetterAgeMilliseconds: Int64(configuration.maxDeliveries * configuration.visibilityTimeoutSeconds) * 1000)
    let contexts = configuration.streams.map { StreamContext(keys: RedisKeys(stream: $0, namespace: namespace)) }
    // Each stream's reader holds its permits while it blocks on an empty stream (half a
    // second): with several streams, one takes at most its share, or an idle stream's
    // reader would keep the in-flight limit to itself and starve a busy one (a retired
    // stream listed beside the live one drained ~16 messages/s at a limit of 256).
    let readBatch = min(configuration.batchSize, max(1, configuration.maxInFlight / contexts.count))
    let consumers = contexts.map {
        QueueConsumer(
            context: $0, redis: redis, consumer: configuration.workerID, processor: processor, limiter: limiter,
            batchSize: readBatch, readLinger: .milliseconds(configuration.readLingerMilliseconds),
            visibilityTimeout: .seconds(configuration.visibilityTimeoutSeconds), metrics: metrics, logger: logger)
    }
    let stopping = StopFlag()
    let gauges = QueueGauges(redis: redis, contexts: contexts, limiter: limiter, apns: apns, metrics: metrics)
    let readiness = ReadinessCheck(
        redis: redis, postgres: postgres, logger: logger.child("readiness"),
        postgresUsers: "reading credentials and recording outcomes")
    let server = HTTPServer(
        configuration: .init(address: configuration.metricsListen, threads: 2, connectionLimit: 64),
        handler: OperationsHandler(
            readiness: readiness, metrics: metrics, gauges: gauges,
            isStopping: { stopping.isSet }),
        logger: logger.child("operations"))
    return WorkerApplication(
        configuration: configuration, redis: redis, postgres: postgres, checksPostgres: checksPostgres, apns: apns,
        metrics: metrics, limiter: limiter, consumers: consumers, acknowledger: acknowledger, counts: counts,
        circuit: circuit, server: server,
        gauges: gauges, readiness: readiness, stopping: stopping, logger: logger)
}
