import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator
@testable import DispatchWorker

/// Workers die, stop and share: nothing accepted is lost.
@Suite struct LifecycleTests {
    /// Posts `count` Web Pushes (8 at a time); returns the `c` each should arrive with.
    static func pushMany(_ stack: DeliveryStack, subscription id: String, count: Int) async throws -> Set<String> {
        try await withThrowingTaskGroup(of: [String].self) { group in
            for lane in 0..<8 {
                group.addTask {
                    var sent: [String] = []
                    for _ in stride(from: lane, to: count, by: 8) {
                        let body = Fixture.message(recordLength: 40)
                        let response = try await stack.push(id, body: body)
                        try #require(response.status == 201, "push answered \(response.status) \(response.text)")
                        sent.append(Base64URL.encode(body))
                    }
                    return sent
                }
            }
            var all = Set<String>()
            for try await part in group { all.formUnion(part) }
            return all
        }
    }

    /// The `c` values of the messages still on the queue (acknowledged ones are deleted).
    static func queuedCiphertexts(_ stack: DeliveryStack) async throws -> [String] {
        let entries = try await stack.redis.send("XRANGE", stack.keys.stream, "-", "+").array ?? []
        return try entries.flatMap { entry in
            let fields = entry.array?.last?.array?.compactMap(\.bytes) ?? []
            return try QueueMessage.messages(in: StreamEntryFields(fields)).map { Base64URL.encode($0.ciphertext) }
        }
    }

    /// The `c` values the simulator received (with repeats), found by a byte scan
    /// (cheap enough to poll with thousands recorded).
    static func delivered(_ stack: DeliveryStack) -> [String] {
        let marker = Array(#""c":""#.utf8)
        return stack.recordings().compactMap { recorded -> String? in
            let payload = recorded.payload
            guard payload.count > marker.count else { return nil }
            for start in 0...(payload.count - marker.count)
            where payload[start..<(start + marker.count)].elementsEqual(marker) {
                let from = start + marker.count
                guard let end = payload[from...].firstIndex(of: UInt8(ascii: "\"")) else { return nil }
                return String(decoding: payload[from..<end], as: UTF8.self)
            }
            return nil
        }
    }

    /// A send that outlasts a (short) visibility timeout is not taken back by its own
    /// worker's claimer: it goes to APNs once, and its entry is not handed out again
    /// (which would also count towards dead-lettering work still on its way).
    @Test func aSendLongerThanTheVisibilityTimeoutIsNotClaimedBackByItsOwnWorker() async throws {
        try await DeliveryStack.with { stack in
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":4000}"#)
            let worker = try await stack.startWorker(["WORKER_VISIBILITY_TIMEOUT": "1", "WORKER_MAX_DELIVERIES": "2"])
            let (id, _, token) = try await stack.subscribe()
            #expect(try await stack.push(id).status == 201)
            try await eventually("delivered", timeout: .seconds(15)) { stack.recordings(token: token).count >= 1 }
            try await eventually("the queue drained") { try await stack.isDrained() }
            // Past a few more claim passes: nothing was sent twice.
            try await Task.sleep(for: .seconds(1))
            #expect(stack.recordings(token: token).count == 1)
            #expect(worker.metrics.claimed.value() == 0)
            #expect(try await stack.streamLength(stack.keys.deadLetters) == 0)
        }
    }

    /// A worker reading two streams (one being retired, now empty, beside the live one)
    /// under a low in-flight limit: the idle stream's reader, blocked on its empty
    /// stream, holds only its share of the permits, so the live stream drains at once
    /// (it used to crawl at ~2 messages a second, waiting for the blocked read's permits).
    @Test func anIdleStreamDoesNotStarveTheLiveOneUnderALowInFlightLimit() async throws {
        try await DeliveryStack.with { stack in
            let retired = "\(stack.namespace):queue:{retired}"
            let worker = try await stack.startWorker([
                "WORKER_STREAMS": "\(retired),\(stack.keys.stream)", "WORKER_MAX_IN_FLIGHT": "20",
            ])
            let (id, _, token) = try await stack.subscribe()
            for _ in 0..<100 { try await stack.enqueue(try await stack.message(subscription: id, token: token)) }
            // A hundred sends need a fraction of a second; starved, they took about a minute.
            try await eventually("all sent", timeout: .seconds(15)) { stack.recordings(token: token).count == 100 }
            await worker.shutdown()
        }
    }

    @Test func aWorkerKilledWith5000InFlightIsFinishedByAnotherAndNothingIsDeadLettered() async throws {
        try await DeliveryStack.with(ingress: ["RATE_LIMIT_PUSH": "1000000/60"], plan: "enterprise") { stack in
            let (id, _, _) = try await stack.subscribe()
            let accepted = try await Self.pushMany(stack, subscription: id, count: 5000)
            #expect(accepted.count == 5000)
            // Slow answers keep them in flight.
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":3000}"#)
            let first = try WorkerProcess(
                environment: stack.workerEnvironment(["WORKER_MAX_IN_FLIGHT": "5000", "WORKER_BATCH_SIZE": "1000"]))
            try await eventually("all 5000 read by the first worker", timeout: .seconds(30)) {
                let length = try await stack.streamLength()
                let pending = try await stack.pendingCount()
                return length > 0 && pending == length
            }
            first.signal(SIGKILL)
            let (exited, _) = await first.waitForExit()
            #expect(!exited)
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":0}"#)
            // What the dead worker left unacknowledged (sent to APNs or not: the
            // simulator records a request when it arrives), and what had arrived.
            let leftOver = Set(try await Self.queuedCiphertexts(stack))
            #expect(!leftOver.isEmpty)
            let arrivedBeforeTheKill = Self.delivered(stack).count

            let second = try WorkerProcess(
                environment: stack.workerEnvironment(["WORKER_VISIBILITY_TIMEOUT": "2", "WORKER_MAX_IN_FLIGHT": "2000"])
            )
            try await eventually("every accepted message delivered", timeout: .seconds(60)) {
                Set(Self.delivered(stack)).isSuperset(of: accepted)
            }
            try await eventually("the queue drained", timeout: .seconds(20)) { try await stack.isDrained() }
            #expect(try await stack.streamLength(stack.keys.deadLetters) == 0)
            #expect(try await stack.quota() == 5000)
            // The second worker sent every message the first left unacknowledged again.
            let sentBySecond = Set(Self.delivered(stack).dropFirst(arrivedBeforeTheKill))
            #expect(sentBySecond.isSuperset(of: leftOver))

            second.signal(SIGTERM)
            let (secondExited, status) = await second.waitForExit()
            #expect(secondExited)
            #expect(status == 0)
        }
    }

    /// The daily counts of what a worker acknowledged are not in its memory: killed
    /// while Postgres is away (so after acknowledging, before any count reached
    /// Postgres), it loses none, and the next worker writes them all, once.
    @Test func aWorkerKilledBeforeItsCountsReachedPostgresLosesNone() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await DeliveryStack.with { stack in
            let device = try await stack.subscribe()
            let first = try WorkerProcess(environment: stack.workerEnvironment(["DATABASE_URL": databaseURL]))
            #expect(try await stack.push(device.id).status == 201)
            try await eventually("the first push counted") { try await stack.dailyCounts().sent == 1 }

            relay.cut()
            for _ in 0..<30 { #expect(try await stack.push(device.id).status == 201) }
            try await eventually("delivered and acknowledged without Postgres") {
                try await stack.isDrained() && stack.recordings(token: device.token).count == 31
            }
            first.signal(SIGKILL)
            _ = await first.waitForExit()
            relay.restore()
            #expect(try await stack.dailyCounts().sent == 1)

            let second = try WorkerProcess(environment: stack.workerEnvironment())
            try await eventually("the dead worker's counts written by the next") {
                try await stack.dailyCounts().sent == 31
            }
            try await Task.sleep(for: .seconds(2))  // more transfers
            #expect(try await stack.dailyCounts().sent == 31, "written once")
            second.signal(SIGTERM)
            _ = await second.waitForExit()
        }
    }

    /// A worker restarted under its name (a pod's container, a systemd unit) sends what
    /// its dead predecessor left unacknowledged at once, not after the visibility
    /// timeout (10 minutes here), and each only once more.
    @Test func aWorkerRestartedUnderItsNameResumesWhatItLeftAtOnce() async throws {
        try await DeliveryStack.with(ingress: ["RATE_LIMIT_PUSH": "1000000/60"], plan: "enterprise") { stack in
            let (id, _, _) = try await stack.subscribe()
            let accepted = try await Self.pushMany(stack, subscription: id, count: 400)
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":3000}"#)
            // Small reads: the resumption takes several pages.
            let environment = stack.workerEnvironment(["WORKER_VISIBILITY_TIMEOUT": "600", "WORKER_BATCH_SIZE": "64"])
            let first = try WorkerProcess(environment: environment)
            try await eventually("all 400 read by the first worker", timeout: .seconds(30)) {
                let length = try await stack.streamLength()
                let pending = try await stack.pendingCount()
                return length > 0 && pending == length
            }
            first.signal(SIGKILL)
            _ = await first.waitForExit()
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":0}"#)
            let leftOver = Set(try await Self.queuedCiphertexts(stack))
            #expect(!leftOver.isEmpty)

            let second = try WorkerProcess(environment: environment)
            try await eventually("every accepted message delivered", timeout: .seconds(20)) {
                Set(Self.delivered(stack)).isSuperset(of: accepted)
            }
            try await eventually("the queue drained", timeout: .seconds(10)) { try await stack.isDrained() }
            #expect(try await stack.streamLength(stack.keys.deadLetters) == 0)
            // At most twice: by the predecessor (it may have sent before it died) and again.
            let copies = Dictionary(grouping: Self.delivered(stack), by: { $0 }).values.map(\.count)
            #expect(copies.allSatisfy { $0 <= 2 })
            second.signal(SIGTERM)
            let (exited, status) = await second.waitForExit()
            #expect(exited && status == 0)
        }
    }

    /// A consumer long idle with nothing pending is removed from the group, but only
    /// if that still holds where it is removed: a worker restarted under the name may
    /// have read entries since the consumers were listed, and `DELCONSUMER` would drop
    /// them from the pending list (never acknowledged, never claimed).
    @Test func anIdleConsumerIsRemovedOnlyIfStillIdleWithNothingPending() async throws {
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        defer { redis.close() }
        let stream = "pushgate-test:queue:{idle\(UInt64.random(in: 0...UInt64.max))}"
        let group = RedisKeys.consumerGroup
        defer { Task { _ = try? await redis.send("DEL", stream) } }
        _ = try await redis.send("XGROUP", "CREATE", stream, group, "0", "MKSTREAM")
        for name in ["gone", "restarted"] { _ = try await redis.send("XGROUP", "CREATECONSUMER", stream, group, name) }
        func remove(_ name: String, idleOver milliseconds: Int) async throws -> Int64? {
            try await redis.run(
                QueueConsumer.removeIdleConsumer, keys: [stream], arguments: [group, name, milliseconds]
            ).int
        }
        try await Task.sleep(for: .milliseconds(100))
        // "restarted" reads an entry after the list was read: it stays, and so does its entry.
        _ = try await redis.send("XADD", stream, "*", "m", "1")
        _ = try await redis.send("XREADGROUP", "GROUP", group, "restarted", "COUNT", "1", "STREAMS", stream, ">")
        #expect(try await remove("restarted", idleOver: 50) == 0)
        #expect(try await remove("restarted", idleOver: 0) == 0, "something pending")
        let pending = try await redis.send("XPENDING", stream, group)
        #expect(pending.array?.first?.int == 1)
        #expect(try await remove("gone", idleOver: 60_000) == 0, "not idle long enough")
        #expect(try await remove("gone", idleOver: 50) == 1)
        #expect(try await remove("nobody", idleOver: 0) == 0)
        let left = try await redis.send("XINFO", "CONSUMERS", stream, group).array ?? []
        #expect(left.count == 1)
    }

    /// A read or claim whose answer was lost (a timeout while Redis stalled) may still
    /// have run in Redis, handing entries to the worker's name that nothing in it holds:
    /// they are taken back within seconds (`QueueConsumer.orphanAge`), not after the
    /// visibility timeout (10 minutes here). The entry is moved to the running worker's
    /// name here as such a read would hand it over.
    @Test func anEntryLeftUnderTheWorkersNameByALostReadIsSentWithinSeconds() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            let name = "orphans-\(UInt32.random(in: 0...UInt32.max))"
            let entry = try await stack.enqueue(try await stack.message(subscription: id, token: token))
            try await stack.handOut(to: "ghost")
            let worker = try await stack.startWorker(["WORKER_ID": name, "WORKER_VISIBILITY_TIMEOUT": "600"])
            // Past its start-up pass over its own name once it delivers a fresh push.
            let (fresh, _, freshToken) = try await stack.subscribe()
            #expect(try await stack.push(fresh).status == 201)
            try await eventually("the fresh push delivered") { stack.recordings(token: freshToken).count == 1 }
            _ = try await stack.redis.send("XCLAIM", stack.keys.stream, RedisKeys.consumerGroup, name, 0, entry)
            try await eventually("the orphan sent", timeout: .seconds(15)) { stack.recordings(token: token).count == 1 }
            try await eventually("the queue drained") { try await stack.isDrained() }
            #expect(worker.metrics.claimed.value() == 1)
            #expect(stack.recordings(token: freshToken).count == 1)
        }
    }

    /// The sweep takes only what nothing here holds: a message whose APNs answer takes
    /// longer than `QueueConsumer.orphanAge` is pending, idle, under the worker's name
    /// all along, and is sent once.
    @Test func anEntryOnItsWayLongerThanTheOrphanAgeIsNotTakenBack() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            // Two sweeps (every 5 s) pass while it is on its way, under the 15 s APNs timeout.
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":12000}"#)
            let worker = try await stack.startWorker(["WORKER_VISIBILITY_TIMEOUT": "600"])
            #expect(try await stack.push(id).status == 201)
            try await eventually("delivered", timeout: .seconds(25)) { stack.recordings(token: token).count == 1 }
            try await eventually("the queue drained") { try await stack.isDrained() }
            #expect(worker.metrics.claimed.value() == 0)
            #expect(stack.recordings(token: token).count == 1)
        }
    }

    @Test func aGracefulStopUnderLoadLosesNothingAndLeavesNothingPending() async throws {
        try await DeliveryStack.with(ingress: ["RATE_LIMIT_PUSH": "1000000/60"], plan: "enterprise") { stack in
            let (id, _, _) = try await stack.subscribe()
            let accepted = try await Self.pushMany(stack, subscription: id, count: 1000)
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":200}"#)
            let first = try await stack.startWorker(["WORKER_MAX_IN_FLIGHT": "300"])
            try await eventually("some delivered") { stack.recordings().count >= 100 }
            let clean = await first.shutdown(deadline: .seconds(10))
            #expect(clean)
            #expect(try await stack.pendingCount() == 0)
            let afterStop = stack.recordings().count
            #expect(afterStop < 1000)
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":0}"#)
            try await stack.startWorker()
            try await eventually("the rest delivered", timeout: .seconds(30)) { Self.delivered(stack).count >= 1000 }
            // Everything acknowledged: no send of it can still arrive after the count.
            try await eventually("the queue drained", timeout: .seconds(20)) { try await stack.isDrained() }
            let delivered = Self.delivered(stack)
            #expect(delivered.count == 1000)  // each exactly once: the stop acknowledged what it sent
            #expect(Set(delivered) == accepted)
        }
    }

    @Test func anEntryHandedOutTooOftenIsDeadLetteredAndItsQuotaReleased() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            _ = try await stack.redis.send(
                "XGROUP", "CREATE", stack.keys.stream, RedisKeys.consumerGroup, "0", "MKSTREAM")
            // Queued long enough ago (WORKER_MAX_DELIVERIES visibility timeouts, 2 s here).
            let entry = try await stack.enqueue(
                try await stack.message(subscription: id, token: token, reply: "dead"), addedSecondsAgo: 10)
            // A worker that read it and died, twice.
            _ = try await stack.redis.send(
                "XREADGROUP", "GROUP", RedisKeys.consumerGroup, "ghost", "COUNT", 10, "STREAMS", stack.keys.stream, ">")
            _ = try await stack.redis.send("XCLAIM", stack.keys.stream, RedisKeys.consumerGroup, "ghost-2", 0, entry)
            try await stack.startWorker(["WORKER_MAX_DELIVERIES": "2", "WORKER_VISIBILITY_TIMEOUT": "1"])
            let reply = try await stack.awaitReply("dead")
            #expect(reply["status"] == "failed")
            let dead = try await stack.redis.send("XRANGE", stack.keys.deadLetters, "-", "+")
            let fields = dead.array?.first?.array?.last?.array?.compactMap(\.string) ?? []
            #expect(
                fields.firstIndex(of: "dead_reason").map { fields[$0 + 1] } == "handed out 3 times without an outcome")
            #expect(try await stack.quota() == 0)
            #expect(try await stack.pendingCount() == 0)
            #expect(stack.recordings(token: token).isEmpty)
        }
    }

    /// A worker crash-looping hands out what it held again at every restart, within
    /// seconds: an entry handed out too often but queued less than
    /// `WORKER_MAX_DELIVERIES` visibility timeouts ago is sent, not dead-lettered.
    @Test func anEntryHandedOutTooOftenByABurstOfRestartsIsSentNotDeadLettered() async throws {
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            _ = try await stack.redis.send(
                "XGROUP", "CREATE", stack.keys.stream, RedisKeys.consumerGroup, "0", "MKSTREAM")
            let entry = try await stack.enqueue(try await stack.message(subscription: id, token: token, reply: "kept"))
            // Taken by the worker's name, which died and came back four times.
            _ = try await stack.redis.send(
                "XREADGROUP", "GROUP", RedisKeys.consumerGroup, "crash-looping", "COUNT", 10, "STREAMS",
                stack.keys.stream, ">")
            for _ in 0..<4 {
                _ = try await stack.redis.send(
                    "XCLAIM", stack.keys.stream, RedisKeys.consumerGroup, "crash-looping", 0, entry)
            }
            try await stack.startWorker([
                "WORKER_ID": "crash-looping", "WORKER_MAX_DELIVERIES": "2", "WORKER_VISIBILITY_TIMEOUT": "60",
            ])
            #expect(try await stack.awaitReply("kept")["status"] == "sent")
            #expect(stack.recordings(token: token).count == 1)
            #expect(try await stack.streamLength(stack.keys.deadLetters) == 0)
            #expect(try await stack.quota() == 1)
        }
    }

    /// Sends cut off by the shutdown deadline go back through the retry set, each
    /// alone, and their entry is acknowledged: nothing stays pending for a claim.
    @Test func sendsUnfinishedAtTheDeadlineGoBackThroughTheRetrySet() async throws {
        try await DeliveryStack.with { stack in
            var messages: [QueueMessage] = []
            for _ in 0..<2 {
                let (id, _, token) = try await stack.subscribe()
                messages.append(try await stack.message(subscription: id, token: token))
            }
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":5000}"#)
            let worker = try await stack.startWorker()
            try await stack.enqueue(fields: QueueMessage.batchFields(messages))
            try await eventually("the entry read") { try await stack.pendingCount() == 1 }
            await worker.shutdown(deadline: .milliseconds(300))
            #expect(try await stack.pendingCount() == 0)
            #expect(try await stack.streamLength() == 0)
            let retried = try await stack.redis.send("ZRANGE", stack.keys.retrySchedule, 0, -1).array ?? []
            #expect(retried.count == 2)
            #expect(worker.metrics.retries.value("shutdown") == 2)
            #expect(try await stack.quota() == 2)

            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":0}"#)
            try await stack.startWorker()
            try await eventually("both sent by the next worker") {
                try await stack.isDrained()
                    && messages.allSatisfy { !stack.recordings(token: $0.deviceToken).isEmpty }
            }
            #expect(try await stack.quota() == 2)
            try await eventually("the daily count") { try await stack.dailyCounts().sent == 2 }
        }
    }

    @Test func anEntryOfSeveralMessagesHandedOutTooOftenIsDeadLetteredWhole() async throws {
        try await DeliveryStack.with { stack in
            var messages: [QueueMessage] = []
            for index in 0..<3 {
                let (id, _, token) = try await stack.subscribe()
                messages.append(try await stack.message(subscription: id, token: token, reply: "dead\(index)"))
            }
            _ = try await stack.redis.send(
                "XGROUP", "CREATE", stack.keys.stream, RedisKeys.consumerGroup, "0", "MKSTREAM")
            let entry = try await stack.enqueue(fields: QueueMessage.batchFields(messages), addedSecondsAgo: 10)
            _ = try await stack.redis.send(
                "XREADGROUP", "GROUP", RedisKeys.consumerGroup, "ghost", "COUNT", 10, "STREAMS", stack.keys.stream, ">")
            _ = try await stack.redis.send("XCLAIM", stack.keys.stream, RedisKeys.consumerGroup, "ghost-2", 0, entry)
            #expect(try await stack.quota() == 3)
            let worker = try await stack.startWorker(["WORKER_MAX_DELIVERIES": "2", "WORKER_VISIBILITY_TIMEOUT": "1"])
            for index in 0..<3 {
                let reply = try await stack.awaitReply("dead\(index)")
                #expect(reply == ["mid": messages[index].messageID, "status": "failed", "reason": "provider_error"])
            }
            let dead = try await stack.redis.send("XRANGE", stack.keys.deadLetters, "-", "+").array ?? []
            #expect(dead.count == 1)
            let fields = dead.first?.array?.last?.array?.compactMap(\.bytes) ?? []
            // All the entry's fields, then why: replayable as it was.
            #expect(Array(fields.dropLast(4)) == QueueMessage.batchFields(messages))
            #expect(try await stack.quota() == 0)
            #expect(try await stack.pendingCount() == 0)
            #expect(worker.metrics.deadLetters.value("deliveries") == 3)
            // When the newest dead letter came, from the stream (a killed worker's counter is lost).
            try await eventually("the newest dead letter's time") {
                let newest = worker.metrics.newestDeadLetter.value(stack.keys.stream)
                return abs(newest - Date().timeIntervalSince1970) < 30
            }
            for message in messages { #expect(stack.recordings(token: message.deviceToken).isEmpty) }
            try await eventually("the daily count") { try await stack.dailyCounts().failed == 3 }
        }
    }

    /// A worker rolled out before `migrate` consumes nothing while the schema is older
    /// than it needs (its /readyz says why), and starts once the schema is current.
    @Test func aWorkerStartedAgainstAnOlderSchemaWaitsForMigrate() async throws {
        let database = try await ScratchDatabase.create("worker")
        try await DeliveryStack.with { stack in
            let (id, _, token) = try await stack.subscribe()
            // Aged past the age up to which messages that waited trust the revocation
            // marks, so it is looked up in Postgres before it goes, whatever this
            // machine's speed.
            var message = try await stack.message(subscription: id, token: token, reply: "waits")
            message.acceptedAt -= RetriedSubscriptionCheck.loggedAge + 60_000
            try await stack.enqueue(message)
            let metricsPort = try UnusedPort.loopback()
            let starting = Task {
                try await stack.startWorker([
                    "DATABASE_URL": database.url, "METRICS_LISTEN": "127.0.0.1:\(metricsPort)",
                ])
            }
            let operations = RawHTTPClient(port: metricsPort)
            try await eventually("/readyz naming the schema") {
                (try? await operations.request("GET", "/readyz"))?.text.contains("schema_behind") == true
            }
            // Nothing consumed meanwhile: the message is still on the stream, unanswered.
            #expect(try await stack.redis.send("XLEN", stack.keys.stream).int == 1)
            #expect(try await stack.redis.send("LLEN", stack.keys.reply("waits")).int == 0)

            let client = PostgresClient(url: database.url, maximumConnections: 1)
            try await Migrator(logger: Logger(component: "test", minimumLevel: .warning)).migrate(client)
            client.close()
            _ = try await starting.value
            // Consumed now; that database knows no such subscription, hence the outcome
            // (the message waited, so it is looked up before it goes).
            let reply = try await stack.awaitReply("waits")
            #expect(reply["status"] == "not_found")
        }
        try await database.drop()
    }

    @Test func metricsHealthAndReadinessAreServed() async throws {
        try await DeliveryStack.with { stack in
            let worker = try await stack.startWorker()
            let (id, _, token) = try await stack.subscribe()
            #expect(try await stack.push(id).status == 201)
            try await eventually("the notification") { stack.recordings(token: token).count == 1 }
            let client = RawHTTPClient(port: worker.metricsPort)
            try await eventually("the sent counter") {
                try await client.request("GET", "/metrics").text.contains(
                    #"pushgate_worker_sends_total{outcome="sent",reason=""} 1"#)
            }
            // Delivered and acknowledged: nothing in flight, though the reader waits on
            // the empty queue holding a batch's permits.
            try await eventually("no message in flight") {
                try await client.request("GET", "/metrics").text.contains("\npushgate_worker_in_flight 0\n")
            }
            // The queue gauges once the sampler has run (every 2 s, from the start).
            try await eventually("the queue gauges") {
                try await client.request("GET", "/metrics").text.contains("pushgate_queue_lag_seconds{")
            }
            let metrics = try await client.request("GET", "/metrics").text
            for name in [
                "pushgate_queue_lag_seconds{stream=\"\(stack.keys.stream)\"}", "pushgate_worker_queue_length",
                "pushgate_worker_in_flight", "pushgate_worker_apns_connections_open 1",
                "pushgate_worker_apns_request_duration_seconds_count 1",
                // The series alerts watch for rare events are there at 0 before the first.
                #"pushgate_worker_dead_letters_total{reason="deliveries"} 0"#,
                #"pushgate_worker_sends_total{outcome="failed",reason="credential_rejected"} 0"#,
                #"pushgate_worker_sends_total{outcome="failed",reason="credential_missing"} 0"#,
                #"pushgate_worker_retries_total{cause="ServiceUnavailable"} 0"#,
                #"pushgate_worker_retries_total{cause="credential_key"} 0"#,
                "pushgate_worker_circuit_raised_total 0",
                "pushgate_worker_dead_letter_newest_timestamp_seconds{stream=\"\(stack.keys.stream)\"} 0",
            ] {
                #expect(metrics.contains(name), "\(name) missing")
            }
            #expect(try await client.request("GET", "/healthz").status == 200)
            let post = try await client.request("POST", "/metrics")
            #expect(post.status == 405)
            #expect(post.headers["allow"] == "GET, HEAD")
            #expect(try await client.request("POST", "/nothing").status == 404)
            let ready = try await client.request("GET", "/readyz")
            #expect(ready.status == 200)
            #expect(ready.text == #"{"redis":"ok","postgres":"ok"}"#)
        }
    }
}
