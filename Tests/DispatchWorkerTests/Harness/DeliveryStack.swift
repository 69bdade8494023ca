import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import DispatchWorker
@testable import IngressService

/// Everything between a Web Push sender and Apple, started in-process for one
/// test: the APNs simulator, an ingress on port 0, an account/app/bundle id with a
/// real sealed `.p8` the simulator trusts, and (on request) workers, all on their
/// own Redis namespace and queue stream so tests run in parallel.
final class DeliveryStack: @unchecked Sendable {
    let simulator: SimulatorApplication
    let ingress: IngressApplication
    let client: RawHTTPClient
    let keys: RedisKeys
    let namespace: String
    let fixture: Fixture
    let teamID: String
    let keyID: String
    let credentialKey: String
    let directory: URL
    private var workers: [WorkerApplication] = []

    var redis: RedisClient { ingress.redis }
    var postgres: PostgresClient { ingress.postgres }
    var credentialID: String { fixture.credentialID! }
    var control: RawHTTPClient { RawHTTPClient(port: simulator.controlAddress.port) }

    private init(
        simulator: SimulatorApplication, ingress: IngressApplication, keys: RedisKeys, namespace: String,
        fixture: Fixture, teamID: String, keyID: String, credentialKey: String, directory: URL
    ) {
        self.simulator = simulator
        self.ingress = ingress
        self.client = RawHTTPClient(port: ingress.port)
        self.keys = keys
        self.namespace = namespace
        self.fixture = fixture
        self.teamID = teamID
        self.keyID = keyID
        self.credentialKey = credentialKey
        self.directory = directory
    }

    static func start(ingress overrides: [String: String] = [:], plan: String = "plus") async throws -> DeliveryStack {
        let unique = UInt64.random(in: 0...UInt64.max)
        let namespace = "pushgate-test:\(unique)"
        let keys = RedisKeys(stream: "\(namespace):queue:{w\(unique)}", namespace: namespace)
        let credentialKey = Data(SecureRandom.bytes(32)).base64EncodedString()
        var environment = [
            "DATABASE_URL": TestEnvironment.databaseURL, "REDIS_URL": TestEnvironment.redisURL,
            "CREDENTIAL_KEY": credentialKey, "PUBLIC_BASE_URL": "https://push.example.test",
            "INGRESS_LISTEN": "127.0.0.1:0", "QUEUE_STREAM": keys.stream,
        ]
        environment.merge(overrides) { _, new in new }
        let configuration = try IngressConfiguration(environment: Environment(environment))
        let ingress = try buildApplication(
            configuration: configuration, logger: Logger(component: "ingress", minimumLevel: .warning), keys: keys)
        try ingress.start(sweep: false)

        // A real credential: a fresh key, sealed as the admin API seals it.
        let fixture = try await Fixture.create(ingress.postgres, plan: plan)
        let suffix = String(format: "%010llX", unique & 0xFF_FFFF_FFFF)
        let teamID = "T\(suffix.suffix(9))"
        let keyID = "K\(suffix.suffix(9))"
        let privateKey = try P256PrivateKey.generate()
        let sealed = try PushCredentialSealer(key: Array(Data(base64Encoded: credentialKey)!))
            .seal(privateKey, credentialID: fixture.credentialID!)
        try await ingress.postgres.execute(
            """
            UPDATE push_credentials SET team_id = \(teamID), key_id = \(keyID), sealed_key = \(sealed)
            WHERE id = \(fixture.credentialID!)
            """)

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("worker-test-\(unique)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var simulatorConfiguration = SimulatorConfiguration(teams: [
            teamID: SimulatorConfiguration.Team(keys: [keyID: privateKey.publicKey], bundleIDs: [fixture.topic])
        ])
        simulatorConfiguration.maxRecordedNotifications = 50_000
        simulatorConfiguration.eventLoops = 1
        let simulator = try await SimulatorApplication.start(
            configuration: simulatorConfiguration, listen: ListenAddress(host: "127.0.0.1", port: 0),
            control: ListenAddress(host: "127.0.0.1", port: 0), caFile: directory.appendingPathComponent("ca.pem").path,
            logger: Logger(component: "apns-simulator", minimumLevel: .warning))
        return DeliveryStack(
            simulator: simulator, ingress: ingress, keys: keys, namespace: namespace, fixture: fixture, teamID: teamID,
            keyID: keyID, credentialKey: credentialKey, directory: directory)
    }

    /// Runs `body` with a started stack and always stops it.
    static func with(
        ingress overrides: [String: String] = [:], plan: String = "plus", _ body: (DeliveryStack) async throws -> Void
    ) async throws {
        let stack = try await start(ingress: overrides, plan: plan)
        do {
            try await body(stack)
        } catch {
            await stack.stop()
            throw error
        }
        await stack.stop()
    }

    func stop() async {
        for worker in workers { await worker.shutdown(deadline: .seconds(2)) }
        await simulator.shutdown()
        // A client of its own: a test may have shut the ingress (and its pools) down.
        if let cleaner = try? RedisClient(url: TestEnvironment.redisURL) {
            let found = (try? await cleaner.send("KEYS", namespace + ":*"))?.array ?? []
            let names = found.compactMap(\.bytes)
            if !names.isEmpty { _ = try? await cleaner.send(argv: [Array("DEL".utf8)] + names) }
            cleaner.close()
        }
        await ingress.shutdown(deadline: .seconds(2))
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: Workers

    /// The worker's environment: production at `https://localhost:<port>`, sandbox at
    /// `https://127.0.0.1:<port>` (the same simulator; the recorded `:authority` tells them apart).
    func workerEnvironment(_ overrides: [String: String] = [:]) -> [String: String] {
        var environment = [
            "DATABASE_URL": TestEnvironment.databaseURL, "REDIS_URL": TestEnvironment.redisURL,
            "CREDENTIAL_KEY": credentialKey, "APNS_CA_FILE": simulator.caFile,
            "APNS_PRODUCTION_URL": "https://localhost:\(simulator.listenAddress.port)",
            "APNS_SANDBOX_URL": "https://127.0.0.1:\(simulator.listenAddress.port)",
            "WORKER_STREAMS": keys.stream, "WORKER_ID": "worker-\(UInt32.random(in: 0...UInt32.max))",
            "METRICS_LISTEN": "127.0.0.1:0", "WORKER_RETRY_BASE_MS": "100", "WORKER_RETRY_CAP_MS": "1000",
        ]
        environment.merge(overrides) { _, new in new }
        return environment
    }

    /// Builds and starts an in-process worker; stopped with the stack unless stopped before.
    @discardableResult
    func startWorker(_ overrides: [String: String] = [:], logger: Logger? = nil) async throws -> WorkerApplication {
        let configuration = try WorkerConfiguration(environment: Environment(workerEnvironment(overrides)))
        let worker = try buildWorker(
            configuration: configuration, logger: logger ?? Logger(component: "worker", minimumLevel: .warning),
            namespace: namespace)
        try await worker.start()
        workers.append(worker)
        return worker
    }

    // MARK: Ingress

    func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []) async throws
        -> RawHTTPClient.Response
    {
        try await client.request(method, path, headers: headers, body: body)
    }

    /// Registers (and activates) a device; returns its id, secret and token.
    func subscribe(sandbox: Bool = false, token: String = Fixture.token()) async throws -> (
        id: String, secret: String, token: String
    ) {
        let json = #"{"topic": "\#(fixture.topic)", "token": "\#(token)", "sandbox": \#(sandbox)}"#
        let response = try await request("POST", "/api/push/v1/subscriptions", body: Array(json.utf8))
        try #require(response.status == 201, "registration answered \(response.status) \(response.text)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String])
        let id = try #require(object["id"])
        let secret = try #require(object["secret"])
        let activated = try await request(
            "POST", "/api/push/v1/subscriptions/\(id)/activate", headers: [("Authorization", "Bearer \(secret)")])
        try #require(activated.status == 204)
        return (id, secret, token)
    }

    func push(_ id: String, body: [UInt8] = Fixture.message(), headers: [(String, String)] = Fixture.pushHeaders)
        async throws -> RawHTTPClient.Response
    {
        try await request("POST", "/api/push/p/\(id)", headers: headers, body: body)
    }

    // MARK: Simulator

    func recordings(token: String? = nil) -> [RecordedNotification] {
        simulator.state.recordings(deviceToken: token)
    }

    /// Sends the simulator has received and not answered yet (held back by `/latency`).
    var responsesHeld: Int { simulator.state.responsesHeld }

    @discardableResult
    func controlRequest(_ method: String, _ path: String, _ json: String = "") async throws -> RawHTTPClient.Response {
        try await control.request(
            method, path, headers: json.isEmpty ? [] : [("Content-Type", "application/json")], body: Array(json.utf8))
    }

    // MARK: Redis state

    func quota() async throws -> Int64 {
        try await redis.send("GET", keys.quota(account: fixture.accountID, month: RedisKeys.quotaMonth())).int ?? 0
    }

    func streamLength(_ key: String? = nil) async throws -> Int {
        Int(try await redis.send("XLEN", key ?? keys.stream).int ?? -1)
    }

    /// Messages on the queue stream (an entry holds one hot-path run's).
    func queuedMessages() async throws -> Int {
        let entries = try await redis.send("XRANGE", keys.stream, "-", "+").array ?? []
        return try entries.reduce(0) { count, entry in
            let fields = entry.array?.last?.array?.compactMap(\.bytes) ?? []
            return count + (try QueueMessage.messages(in: StreamEntryFields(fields)).count)
        }
    }

    /// Nothing on the queue stream, nothing read but not acknowledged and nothing in
    /// the delayed-retry set, read in one script: a message moves between the stream
    /// and the set (`promoteRetries`, `acknowledge`) atomically, and separate reads
    /// could each miss it.
    func isDrained() async throws -> Bool {
        let script = """
            local left = redis.call('XLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2])
            local found, pending = pcall(redis.call, 'XPENDING', KEYS[1], ARGV[1])
            if found then left = left + pending[1] end
            return left
            """
        let reply = try await redis.send(
            "EVAL", script, 2, keys.stream, keys.retrySchedule, RedisKeys.consumerGroup)
        return reply.int == 0
    }

    /// Entries read by some worker and not acknowledged.
    func pendingCount() async throws -> Int {
        do {
            let reply = try await redis.send("XPENDING", keys.stream, RedisKeys.consumerGroup)
            return Int(reply.array?.first?.int ?? 0)
        } catch let error as RedisError where error.serverPrefix == "NOGROUP" {
            return 0  // no worker started yet
        }
    }

    /// Daily counts of today for the fixture's app.
    func dailyCounts() async throws -> (sent: Int64, failed: Int64, gone: Int64) {
        let rows = try await postgres.query(
            """
            SELECT sent, failed, gone FROM daily_counts
            WHERE account_id = \(fixture.accountID) AND app_id = \(fixture.appID) AND day = (now() AT TIME ZONE 'UTC')::date
            """)
        guard let row = rows.first else { return (0, 0, 0) }
        return (try row.decode("sent"), try row.decode("failed"), try row.decode("gone"))
    }
}

extension DeliveryStack {
    /// Hands the stream's entries not handed out yet to `consumer`, as a worker of
    /// that name reading them would (the consumer group made if need be).
    func handOut(to consumer: String) async throws {
        _ = try await redis.send("XGROUP", "CREATE", keys.stream, RedisKeys.consumerGroup, "0", "MKSTREAM")
        _ = try await redis.send(
            "XREADGROUP", "GROUP", RedisKeys.consumerGroup, consumer, "COUNT", 10, "STREAMS", keys.stream, ">")
    }
}

/// Polls `condition` until it holds or `timeout` passes; fails the test with `what` then.
func eventually(
    _ what: String, timeout: Duration = .seconds(15), sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async throws -> Bool
) async throws {
    if try await Poll.until(timeout: timeout, interval: .milliseconds(50), condition) { return }
    Issue.record("timed out waiting for \(what)", sourceLocation: sourceLocation)
    throw RawHTTPClient.Failure(description: "timed out waiting for \(what)")
}

extension DeliveryStack {
    /// A queue message as the ingress would write it for `subscription`, with a
    /// quota reservation taken (as the ingress does at accept).
    /// `waited`: accepted long enough ago that the worker checks it against Postgres
    /// before sending (`RetriedSubscriptionCheck.checkedAge`, twice over).
    func message(
        subscription: String, token: String, credential: String? = nil, expiration: Int64? = nil, reply: String? = nil,
        waited: Bool = false
    ) async throws -> QueueMessage {
        let quotaKey = keys.quota(account: fixture.accountID, month: RedisKeys.quotaMonth())
        _ = try await redis.send("INCR", quotaKey)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        return QueueMessage(
            messageID: Base64URL.encode(SecureRandom.bytes(16)), subscriptionID: subscription, appID: fixture.appID,
            accountID: fixture.accountID, credentialID: credential ?? credentialID, topic: fixture.topic,
            deviceToken: token, sandbox: false, alertTitle: "T", alertBody: "B", ciphertext: Fixture.message(),
            priority: 10, expiration: expiration ?? (now / 1000 + 60), collapseID: nil,
            acceptedAt: waited ? now - 2 * RetriedSubscriptionCheck.checkedAge : now,
            quotaKey: quotaKey, replyKey: reply.map { keys.reply($0) })
    }

    @discardableResult
    func enqueue(_ message: QueueMessage, addedSecondsAgo: Int = 0) async throws -> String {
        try await enqueue(fields: message.fields, addedSecondsAgo: addedSecondsAgo)
    }

    /// Adds an entry; `addedSecondsAgo` gives it an id from that long ago (the stream
    /// must hold nothing newer).
    @discardableResult
    func enqueue(fields: [[UInt8]], addedSecondsAgo: Int = 0) async throws -> String {
        let then = Int64(Date().timeIntervalSince1970 * 1000) - Int64(addedSecondsAgo) * 1000
        let id = addedSecondsAgo == 0 ? "*" : "\(then)-*"
        let reply = try await redis.send(argv: [Array("XADD".utf8), Array(keys.stream.utf8), Array(id.utf8)] + fields)
        return reply.string ?? ""
    }

    /// The outcome pushed on a reply list: `[mid, status, reason]`.
    func awaitReply(_ id: String, timeout: Int = 10) async throws -> [String: String] {
        let reply = try await redis.send(RedisCommand("BLPOP", keys.reply(id), timeout), timeout: .seconds(timeout + 2))
        let json = try #require(reply.array?.last?.bytes, "no reply on \(id)")
        return try #require(try JSONSerialization.jsonObject(with: Data(json)) as? [String: String])
    }

    /// Runs `body` while Postgres refuses to `operation` (`UPDATE`, `DELETE`) the row
    /// `id` of `table`, as a write failing for want of Postgres would; `body` lets the
    /// writes through by calling its argument. The refusal lasts two minutes at most: a
    /// run killed before it drops the trigger must not leave a row that fails every
    /// later use of the shared database.
    func withWritesRefused(
        _ operation: String, on table: String, id: String,
        _ body: (_ allow: () async throws -> Void) async throws -> Void
    ) async throws {
        let name = "refuse_\(operation.lowercased())_\(id.lowercased().filter { $0.isLetter || $0.isNumber })"
        let until = ISO8601DateFormatter().string(from: Date().addingTimeInterval(120))
        try await postgres.execute(
            PostgresQuery(
                unsafeSQL: """
                    CREATE FUNCTION \(name)() RETURNS trigger LANGUAGE plpgsql AS
                    $$ BEGIN
                        IF clock_timestamp() < '\(until)'::timestamptz THEN
                            RAISE EXCEPTION 'refused by the test';
                        END IF;
                        RETURN \(operation == "DELETE" ? "OLD" : "NEW");
                    END $$
                    """))
        try await postgres.execute(
            PostgresQuery(
                unsafeSQL: """
                    CREATE TRIGGER \(name) BEFORE \(operation) ON \(table)
                    FOR EACH ROW WHEN (OLD.id = '\(id)') EXECUTE FUNCTION \(name)()
                    """))
        let allow = { [postgres] in
            try await postgres.execute(PostgresQuery(unsafeSQL: "DROP TRIGGER IF EXISTS \(name) ON \(table)"))
            try await postgres.execute(PostgresQuery(unsafeSQL: "DROP FUNCTION IF EXISTS \(name)()"))
        }
        do {
            try await body(allow)
        } catch {
            try? await allow()
            throw error
        }
        try await allow()
    }

    func subscriptionExists(_ id: String) async throws -> Bool {
        try await postgres.query("SELECT 1 FROM subscriptions WHERE id = \(id)").count == 1
    }
}
