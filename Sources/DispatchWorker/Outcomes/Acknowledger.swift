import Shared
import Synchronization

/// Acknowledges finished messages in batches: whatever accumulated while the
/// previous write was under way goes out as one pipelined `MULTI … EXEC` per
/// stream (one `XACK` and one `XDEL` naming every entry, `DECRBY` per quota key,
/// `RPUSH` + `EXPIRE` per reply list), and once it succeeded the outcomes are
/// added to the daily counts and metrics and each message's in-flight permit is
/// given back. A failed write is tried again; the entries stay pending meanwhile
/// (and are claimable by another worker should this one die).
final class Acknowledger: Sendable {
    private struct State {
        var pending: [Acknowledgement] = []
        var waiter: CheckedContinuation<Void, Never>?
        var stopping = false
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

    /// Writes what is queued, then ends the loop.
    func stop() async {
        let waiter = state.withLock { state in
            state.stopping = true
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
                defer { state.pending = [] }
                return state.pending
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
        let first = batch[0].delivery.context.stream
        if batch.allSatisfy({ $0.delivery.context.stream == first }) {
            await write(stream: batch)
            return
        }
        var byStream: [String: [Acknowledgement]] = [:]
        for item in batch { byStream[item.delivery.context.stream, default: []].append(item) }
        for items in byStream.values { await write(stream: items) }
    }

    private func write(stream items: [Acknowledgement]) async {
        var failures = 0
        while true {
            do {
                try await send(items)
                counts.record(items)
                metrics.sentSinceFlush.add(items.count { $0.tally == .sent })
                break
            } catch {
                failures += 1
                if failures == 1 || failures % 100 == 0 {
                    logger.warning(
                        "cannot acknowledge; retrying",
                        metadata: ["entries": "\(items.count)", "error": "\(type(of: error))"])
                }
                if failures >= 50 && state.withLock({ $0.stopping }) {
                    // Shutting down without Redis: leave them pending for another worker.
                    break
                }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        limiter.release(items.count)
    }

    private static let multi = EncodedRedisCommand(RedisCommand("MULTI"))
    private static let exec = EncodedRedisCommand(RedisCommand("EXEC"))

    /// One `MULTI … EXEC` for entries of one stream, written straight in RESP.
    private func send(_ items: [Acknowledgement]) async throws {
        let context = items[0].delivery.context
        let idBytes = items.reduce(0) { $0 + $1.delivery.entry.id.utf8.count + 24 }
        var commands = [Self.multi]
        commands.append(
            EncodedRedisCommand(argumentCount: 3 + items.count, capacity: 64 + idBytes) { command in
                command.append("XACK")
                command.append(context.stream)
                command.append(context.group)
                for item in items { command.append(item.delivery.entry.id) }
            })
        commands.append(
            EncodedRedisCommand(argumentCount: 2 + items.count, capacity: 64 + idBytes) { command in
                command.append("XDEL")
                command.append(context.stream)
                for item in items { command.append(item.delivery.entry.id) }
            })
        var releases: [String: Int] = [:]
        var replies: [String: [String]] = [:]
        // Fields read one by one: copying the whole message would retain each of its strings.
        for item in items {
            if item.releaseQuota { releases[item.delivery.message.quotaKey, default: 0] += 1 }
            if let json = item.replyJSON, let key = item.delivery.message.replyKey {
                replies[key, default: []].append(json)
            }
        }
        for (key, count) in releases { commands.append(EncodedRedisCommand(RedisCommand("DECRBY", key, count))) }
        for (key, values) in replies {
            commands.append(EncodedRedisCommand(RedisCommand("RPUSH", arguments: [key] + values)))
            commands.append(EncodedRedisCommand(RedisCommand("EXPIRE", key, replyLifetimeSeconds)))
        }
        commands.append(Self.exec)
        let answers = try await redis.pipeline(encoded: commands)
        guard let exec = answers.last else { throw RedisError(code: .unexpectedReply, message: "no EXEC reply") }
        _ = try exec.throwingError()
    }
}
