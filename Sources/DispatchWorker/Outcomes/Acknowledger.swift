import Foundation
import Shared
import Synchronization

/// Acknowledges settled entries in batches: whatever accumulated while the
/// previous write was under way goes out as one `QueueScripts.acknowledge` run per
/// stream (`XACK`, `XDEL`, and quota releases, replies, retries and daily counts per
/// entry still pending, so a write retried after a lost answer applies nothing
/// twice), and once it succeeded the pushes are recorded (last-push times) and
/// counted in the metrics, and the entries' in-flight permits are given back. A
/// failed write is tried again; the entries stay pending meanwhile (and are
/// claimable by another worker should this one die). Once stopping, a write is
/// retried only until the instant `stop` names: past it, its entries are left
/// pending for another worker, so a worker cut off from Redis still exits in time.
final class Acknowledger: Sendable {
    private struct State {
        var pending: [Acknowledgement] = []
        var waiter: CheckedContinuation<Void, Never>?
        var stopping = false
        /// Set by `stop`: failed writes are not retried after it.
        var retryUntil: ContinuousClock.Instant?
    }

    private let redis: RedisClient
    private let limiter: InFlightLimiter
    private let counts: DailyCounts
    private let metrics: WorkerMetrics
    private let replyLifetimeSeconds: Int
    private let logger: Logger
    private let state = Mutex(State())
    private let loop = Mutex<Task<Void, Never>?>(nil)

    init(
        redis: RedisClient, limiter: InFlightLimiter, counts: DailyCounts, metrics: WorkerMetrics,
        replyLifetimeSeconds: Int, logger: Logger
    ) {
        self.redis = redis
        self.limiter = limiter
        self.counts = counts
        self.metrics = metrics
        self.replyLifetimeSeconds = replyLifetimeSeconds
        self.logger = logger
    }

    func start() {
        loop.withLock { $0 = Task { await self.run() } }
    }

    func enqueue(_ acknowledgement: Acknowledgement) {
        let waiter = state.withLock { state in
            state.pending.append(acknowledgement)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Writes what is queued, retrying a failed write until `retryUntil`, then ends the loop.
    func stop(retryingUntil retryUntil: ContinuousClock.Instant) async {
        let waiter = state.withLock { state in
            state.stopping = true
            state.retryUntil = retryUntil
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
        await loop.withLock { $0 }?.value
    }

    private func run() async {
        while true {
            let next: [Acknowledgement]? = state.withLock { state in
                guard !state.pending.isEmpty else { return nil }
                let taken = state.pending
                // Sized like the batch taken: the next one is about as large, and
                // growing it append by append reallocates and copies it each doubling.
                state.pending = []
                state.pending.reserveCapacity(taken.count)
                return taken
            }
            if let next {
                await write(next)
                continue
            }
            if state.withLock({ $0.stopping }) { return }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state in
                    if !state.pending.isEmpty || state.stopping { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        }
    }

    private func write(_ batch: [Acknowledgement]) async {
        // Almost always one stream; more only with several WORKER_STREAMS.
        // Compared by reference first: each stream has one context, shared by its entries.
        let first = batch[0].entry.context
        if batch.allSatisfy({ $0.entry.context === first || $0.entry.context.stream == first.stream }) {
            await write(stream: batch)
            return
        }
        var byStream: [String: [Acknowledgement]] = [:]
        for item in batch { byStream[item.entry.context.stream, default: []].append(item) }
        for items in byStream.values { await write(stream: items) }
    }

    private func write(stream entries: [Acknowledgement]) async {
        let plain = entries.filter(\.isPlain)
        let others = entries.filter { !$0.isPlain }
        var failures = 0
        while true {
            do {
                try await send(plain: plain, others: others)
                entries[0].entry.context.held.remove(entries.lazy.map(\.entry.id))
                var sent = 0
                for entry in entries {
                    counts.recordPushes(entry.items)
                    sent += entry.items.count { $0.tally == .sent }
                }
                for entry in others {
                    for item in entry.items {
                        if let retry = item.retry { metrics.retries.increment(by: 1, retry.cause) }
                    }
                }
                metrics.sentSinceFlush.add(sent)
                break
            } catch {
                failures += 1
                if failures == 1 || failures % 100 == 0 {
                    logger.warning(
                        "cannot acknowledge; retrying",
                        metadata: ["entries": "\(entries.count)", "error": "\(type(of: error))"])
                }
                if let retryUntil = state.withLock({ $0.retryUntil }), ContinuousClock.now >= retryUntil {
                    // Shutting down without Redis: leave them pending for another worker.
                    logger.warning(
                        "stopping with entries unacknowledged; they stay pending, claimable",
                        metadata: ["entries": "\(entries.count)"])
                    break
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        limiter.release(entries.reduce(0) { $0 + $1.entry.messageCount })
    }

    /// One `QueueScripts.acknowledge` run for entries of one stream: safe to repeat
    /// when its answer is lost. Written straight into RESP: no byte array per argument.
    private func send(plain: [Acknowledgement], others: [Acknowledgement]) async throws {
        let context = (plain.first ?? others[0]).entry.context
        var counters = BatchCounters(day: UTCDay.text(of: Date()))
        for entry in plain { counters.addPlain(entry.items) }
        // Retried messages are written as their own fields (format 2), made here.
        let retryFields: [[[UInt8]]] = others.flatMap { entry in
            entry.items.map { item in item.retry.map { $0.fields(of: item.delivery.message) } ?? [] }
        }
        let counterNumbers: [Int] = others.flatMap { entry in entry.items.map { counters.number(of: $0) } }
        let otherItems = others.reduce(0) { $0 + $1.items.count }
        let retryFieldCount = retryFields.reduce(0) { $0 + $1.count }
        let argumentCount: Int =
            4 + counters.fields.count + plain.count * 2 + others.count * 2 + otherItems * 6 + retryFieldCount
        // Entry ids are about 15 bytes, plus their 5-byte header and CRLF; a plain entry's counts 8 bytes and more.
        let command = EncodedRedisCommand.script(
            QueueScripts.acknowledge, keys: [context.stream, context.keys.retrySchedule, context.keys.pendingCounts],
            argumentCount: argumentCount,
            capacity: 256 + counters.fields.count * 64 + plain.count * 40 + otherItems * 170
        ) { arguments in
            arguments.append(context.group)
            arguments.append(Int64(replyLifetimeSeconds))
            arguments.append(Int64(counters.fields.count))
            for field in counters.fields { arguments.append(field) }
            arguments.append(Int64(plain.count))
            for entry in plain { arguments.append(entry.entry.id) }
            for index in plain.indices { arguments.append(counters.plainRecords(index)) }
            var retries = retryFields.makeIterator()
            var numbers = counterNumbers.makeIterator()
            for entry in others {
                arguments.append(entry.entry.id)
                arguments.append(Int64(entry.items.count))
                for item in entry.items {
                    let message = item.delivery.message
                    let reply = item.replyJSON.flatMap { json in message.replyKey.map { ($0, json) } }
                    let fields = retries.next() ?? []
                    arguments.append(item.releaseQuota ? message.quotaKey : "")
                    arguments.append(reply?.0 ?? "")
                    arguments.append(reply?.1 ?? "")
                    arguments.append(Int64(item.retry?.delayMilliseconds ?? 0))
                    arguments.append(Int64(numbers.next() ?? 0))
                    arguments.append(Int64(fields.count))
                    for field in fields { arguments.append(field) }
                }
            }
        }
        _ = try await redis.send(encoded: command)
    }
}
