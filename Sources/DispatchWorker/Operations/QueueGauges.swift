import Foundation
import Shared

/// Samples the queue gauges every `interval`: per stream its length, lag (age of
/// the oldest entry, which is the oldest unacknowledged one since entries are
/// deleted once acknowledged), delayed retries, dead letters and when the newest was
/// added (which outlives the process that added it, unlike its counter); per process the
/// in-flight messages and open APNs connections.
struct QueueGauges: Sendable {
    let redis: RedisClient
    let contexts: [StreamContext]
    let limiter: InFlightLimiter
    let apns: APNsClient
    let metrics: WorkerMetrics

    /// The gauges this process knows by itself (and the batched counters), at once.
    func sampleProcess() {
        metrics.flush()
        metrics.inFlight.set(Double(limiter.messagesInFlight))
        let client = apns.metrics
        metrics.openConnections.set(Double(max(client.connectionsOpened - client.connectionsClosed, 0)))
    }

    /// The queue gauges, from Redis; a stream that cannot be read keeps its last values.
    func sampleQueues() async {
        for context in contexts {
            guard
                let replies = try? await redis.pipeline([
                    RedisCommand("XLEN", context.stream), RedisCommand("XRANGE", context.stream, "-", "+", "COUNT", 1),
                    RedisCommand("ZCARD", context.keys.retrySchedule), RedisCommand("XLEN", context.keys.deadLetters),
                    RedisCommand("TIME"), RedisCommand("XREVRANGE", context.keys.deadLetters, "+", "-", "COUNT", 1),
                ]), replies.count == 6
            else { continue }
            let stream = context.stream
            metrics.queueLength.set(Double(replies[0].int ?? 0), stream)
            let oldest = StreamEntry.list(replies[1], deliveryCount: 0).first?.addedAtMilliseconds
            // Entry ids carry Redis's clock: the lag is measured against it, so a host
            // whose clock is off does not scale the workers (the HPA takes the max).
            let now = Self.milliseconds(fromTime: replies[4]) ?? Int64(Date().timeIntervalSince1970 * 1000)
            metrics.queueLag.set(oldest.map { Double(max(now - $0, 0)) / 1000 } ?? 0, stream)
            metrics.retryScheduled.set(Double(replies[2].int ?? 0), stream)
            metrics.deadLetterLength.set(Double(replies[3].int ?? 0), stream)
            let newestDeadLetter = StreamEntry.list(replies[5], deliveryCount: 0).first?.addedAtMilliseconds
            metrics.newestDeadLetter.set(newestDeadLetter.map { Double($0 / 1000) } ?? 0, stream)
        }
    }

    /// A `TIME` reply (seconds, microseconds) in UNIX milliseconds.
    static func milliseconds(fromTime reply: RedisReply) -> Int64? {
        guard let parts = reply.array, parts.count == 2, let seconds = parts[0].string.flatMap({ Int64($0) }),
            let microseconds = parts[1].string.flatMap({ Int64($0) })
        else { return nil }
        return seconds * 1000 + microseconds / 1000
    }

    func run(every interval: Duration, while running: @Sendable () -> Bool) async {
        while running() {
            sampleProcess()
            await sampleQueues()
            try? await Task.sleep(for: interval)
        }
    }
}
