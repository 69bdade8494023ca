import Foundation
import Shared
import TestSupport
import Testing

@testable import DispatchWorker

/// A worker cut off from Redis (through a relay, so the shared server and the
/// other suites are untouched) while sends are in flight: the sends finish at
/// APNs, their acknowledgements and the reads fail and are tried again, a read
/// whose reply was lost leaves its entries pending until the claimer takes them
/// back (after the 3 s visibility timeout here), and once Redis is back nothing
/// accepted is lost and nothing is left behind. (Under load this found the claimer
/// starved of in-flight permits by the reader, which took them back first.)
@Suite struct RedisOutageTests {
    /// `pushes` accepted for one device, APNs answering in `latency` ms, and a worker that
    /// reaches Redis at `redisURL` (a relay) with a 3 s visibility timeout, under way:
    /// a sixth of the pushes delivered.
    static func sendingThroughRelay(
        _ stack: DeliveryStack, redisURL: String, pushes: Int, maxInFlight: Int, latency: Int
    ) async throws -> (accepted: Set<String>, worker: WorkerApplication, logs: CapturedLogLines) {
        let (id, _, _) = try await stack.subscribe()
        let accepted = try await LifecycleTests.pushMany(stack, subscription: id, count: pushes)
        try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":\#(latency)}"#)
        let (logger, logs) = TestEnvironment.capturingLogger("worker")
        let worker = try await stack.startWorker(
            ["REDIS_URL": redisURL, "WORKER_MAX_IN_FLIGHT": "\(maxInFlight)", "WORKER_VISIBILITY_TIMEOUT": "3"],
            logger: logger)
        // And more on their way: a destination's sends go in windows, the next read from
        // Redis after the last answers, so a cut just after a window's answers would
        // find nothing in flight (seen under CI load).
        try await eventually("some delivered, more on their way") {
            stack.recordings().count >= pushes / 6 && stack.responsesHeld > 0
        }
        return (accepted, worker, logs)
    }

    @Test func aWorkerCutOffFromRedisMidFlightFinishesEverythingOnceRedisIsBack() async throws {
        let (relay, redisURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
        defer { relay.close() }
        try await DeliveryStack.with(ingress: ["RATE_LIMIT_PUSH": "1000000/60"], plan: "enterprise") { stack in
            let (accepted, worker, logs) = try await Self.sendingThroughRelay(
                stack, redisURL: redisURL, pushes: 600, maxInFlight: 200, latency: 1000)

            // Answers take a second, so sends are on their way when Redis goes and finish
            // during the outage (at 200 ms a cut could fall between two batches of sends).
            relay.cut()
            #expect(stack.recordings().count < 600, "the outage came too late to matter")
            // Sends finished during the outage: their acknowledgements had to wait.
            let ackWaited = try await Poll.until(timeout: .seconds(10), interval: .milliseconds(50)) {
                logs.all.contains { $0.contains("cannot acknowledge; retrying") }
            }
            #expect(ackWaited, "delivered \(stack.recordings().count); the worker logged: \(logs.all.suffix(8))")
            relay.restore()
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":0}"#)

            let allDelivered = try await Poll.until(timeout: .seconds(30), interval: .milliseconds(50)) {
                Set(LifecycleTests.delivered(stack)).isSuperset(of: accepted)
            }
            if !allDelivered {
                let missing = accepted.subtracting(LifecycleTests.delivered(stack)).count
                Issue.record(
                    """
                    \(missing) accepted pushes never delivered; queued \(try await stack.queuedMessages()), \
                    pending entries \(try await stack.pendingCount()), permits in flight \(worker.limiter.inFlight)
                    """)
            }
            try await eventually("the queue drained", timeout: .seconds(15)) { try await stack.isDrained() }
            #expect(try await stack.streamLength(stack.keys.deadLetters) == 0)
            #expect(try await stack.quota() == 600)
        }
    }

    /// A worker told to stop while cut off from Redis exits within its deadline and
    /// the few seconds of putting back (WORKER_SHUTDOWN_TIMEOUT's promise), instead of
    /// retrying acknowledgements that cannot be written: what it sent stays pending,
    /// and another worker finishes it once Redis is back (sent again: at least once).
    @Test func aWorkerStoppedWhileCutOffFromRedisExitsInTimeAndLosesNothing() async throws {
        let (relay, redisURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
        defer { relay.close() }
        try await DeliveryStack.with(ingress: ["RATE_LIMIT_PUSH": "1000000/60"], plan: "enterprise") { stack in
            let (accepted, worker, logs) = try await Self.sendingThroughRelay(
                stack, redisURL: redisURL, pushes: 300, maxInFlight: 100, latency: 1000)
            // Answers taking a second: sends are surely on their way when Redis goes.

            relay.cut()
            let stopping = ContinuousClock.now
            let drained = await worker.shutdown(deadline: .seconds(1))
            let took = ContinuousClock.now - stopping
            #expect(!drained)
            // The deadline, 2 s for the sends cut off, 1 s of acknowledgement retries,
            // 1 s for the metrics listener; retrying each batch for 5 s took 8 s and more.
            #expect(took < .seconds(6), "the stop took \(took)")
            #expect(logs.all.contains { $0.contains("stopping with entries unacknowledged") })

            relay.restore()
            try await stack.controlRequest("PUT", "/latency", #"{"milliseconds":0}"#)
            try await stack.startWorker(["WORKER_VISIBILITY_TIMEOUT": "3"])
            try await eventually("every accepted push delivered", timeout: .seconds(30)) {
                Set(LifecycleTests.delivered(stack)).isSuperset(of: accepted)
            }
            try await eventually("the queue drained", timeout: .seconds(15)) { try await stack.isDrained() }
            #expect(try await stack.streamLength(stack.keys.deadLetters) == 0)
            #expect(try await stack.quota() == 300)
        }
    }

    /// A scrape never waits on Redis (its queue gauges come from the sampler): against a
    /// Redis that takes connections and never answers, each command waits out its 5 s
    /// timeout, and a scrape that waited on them would pass a scraper's timeout in the
    /// very outage it should show.
    @Test func metricsAnswerWithoutWaitingOnASilentRedis() async throws {
        let (fd, port) = try UnusedPort.boundSocket()
        defer { _ = close(fd) }
        listen(fd, 16)  // never accepted: connections complete in the backlog, no reply comes
        try await DeliveryStack.with { stack in
            let worker = try await stack.startWorker(["REDIS_URL": "redis://127.0.0.1:\(port)/0"])
            let started = ContinuousClock.now
            let metrics = try await RawHTTPClient(port: worker.metricsPort).request("GET", "/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.text.contains("\npushgate_worker_in_flight 0\n"))
            #expect(ContinuousClock.now - started < .seconds(3))
        }
    }

    /// A worker that starts while Redis does not answer (a host rebooting, a rollout
    /// that got ahead of Redis) starts anyway, as the ingress does, instead of exiting;
    /// once Redis answers it makes the consumer group and sends what was queued.
    @Test func aWorkerStartedWhileRedisIsDownSendsOnceItIsBack() async throws {
        let (relay, redisURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
        defer { relay.close() }
        try await DeliveryStack.with { stack in
            let (id, _, _) = try await stack.subscribe()
            let accepted = try await LifecycleTests.pushMany(stack, subscription: id, count: 20)
            relay.cut()
            let (logger, logs) = TestEnvironment.capturingLogger("worker")
            try await stack.startWorker(["REDIS_URL": redisURL], logger: logger)
            #expect(logs.all.contains { $0.contains("cannot create the consumer group yet") })
            relay.restore()
            try await eventually("every accepted push delivered") {
                Set(LifecycleTests.delivered(stack)) == accepted
            }
            try await eventually("the queue drained") { try await stack.isDrained() }
        }
    }
}
