import Shared
import Synchronization

/// Acknowledges finished messages in batches: whatever accumulated while the
/// previous write was under way goes out as one pipelined `MULTI … EXEC` per
/// stream (`XACK`, `XDEL`, `DECRBY` per quota key, `RPUSH` + `EXPIRE` per reply
/// list), and each message's in-flight permit is given back once its write
/// succeeded. A failed write is tried again; the entries stay pending meanwhile
/// (and are claimable by another worker should this one die).
final class Acknowledger: Sendable {
    private struct State {
        var pending: [Acknowledgement] = []
        var waiter: CheckedContinuation<Void, Never>?
        var stopping = false
    }

    private let redis: RedisClient
    private let limiter: InFlightLimiter
    private let replyLifetimeSeconds: Int
    private let logger: Logger
    private let state = Mutex(State())
    private let loop = Mutex<Task<Void, Never>?>(nil)

    init(redis: RedisClient, limiter: InFlightLimiter, replyLifetimeSeconds: Int, logger: Logger) {
        self.redis = redis
        self.limiter = limiter
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
        var byStream: [String: [Acknowledgement]] = [:]
        for item in batch { byStream[item.context.stream, default: []].append(item) }
        for items in byStream.values {
            var failures = 0
            while true {
                do {
                    try await write(stream: items)
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
    }

    private func write(stream items: [Acknowledgement]) async throws {
        let context = items[0].context
        let ids = items.map(\.entryID)
        var commands = [RedisCommand("MULTI")]
        commands.append(RedisCommand("XACK", arguments: [context.stream, context.group] + ids))
        commands.append(RedisCommand("XDEL", arguments: [context.stream] + ids))
        var releases: [String: Int] = [:]
        for item in items { if let key = item.releaseQuotaKey { releases[key, default: 0] += 1 } }
        for (key, count) in releases { commands.append(RedisCommand("DECRBY", key, count)) }
        var replies: [String: [String]] = [:]
        for item in items { if let reply = item.reply { replies[reply.key, default: []].append(reply.json) } }
        for (key, values) in replies {
            commands.append(RedisCommand("RPUSH", arguments: [key] + values))
            commands.append(RedisCommand("EXPIRE", key, replyLifetimeSeconds))
        }
        commands.append(RedisCommand("EXEC"))
        let answers = try await redis.pipeline(commands)
        guard let exec = answers.last else { throw RedisError(code: .unexpectedReply, message: "no EXEC reply") }
        _ = try exec.throwingError()
    }
}
