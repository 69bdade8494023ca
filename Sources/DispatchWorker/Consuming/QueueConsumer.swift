import Foundation
import Shared
import Synchronization

/// Reads one queue stream as a member of the `workers` consumer group:
///
/// * first, before the reader and the claimer start, the entries still pending
///   under this worker's own name (a process of that name died) are sent again at
///   once (`resumeOwnPending()`);
/// * the reader takes in-flight permits, `XREADGROUP`s new entries for about as
///   many messages (blocking up to half a second), read straight out of the reply,
///   and hands them to the `EntryProcessor`; under load it lingers a moment between
///   reads (`lingers(afterReading:of:)`);
/// * the claimer, every half visibility timeout, claims other consumers' entries that
///   stayed unacknowledged longer than the visibility timeout (their worker died or
///   hangs), with their delivery counts, so entries handed out too often are
///   dead-lettered (never its own: a send here may outlast a short timeout);
/// * the orphan sweep, every `orphanAge`, takes back entries pending under this
///   worker's name that no task here holds (`HeldEntries`: a read or claim whose
///   answer was lost but which ran in Redis);
/// * the retry mover puts due entries of the delayed-retry set back on the stream.
///
/// Any number of workers on any hosts can run these side by side.
final class QueueConsumer: Sendable {
    let context: StreamContext
    private let redis: RedisClient
    private let consumer: String
    let processor: EntryProcessor
    private let limiter: InFlightLimiter
    private let batchSize: Int
    private let readLinger: Duration
    private let visibilityTimeout: Duration
    private let metrics: WorkerMetrics
    private let logger: Logger
    private let stopping = Atomic<Bool>(false)
    private let tasks = Mutex<[Task<Void, Never>]>([])
    /// How long one `XREADGROUP` blocks; also how long stopping may take to notice.
    static let blockMilliseconds = 500

    init(
        context: StreamContext, redis: RedisClient, consumer: String, processor: EntryProcessor,
        limiter: InFlightLimiter, batchSize: Int, readLinger: Duration = .zero, visibilityTimeout: Duration,
        metrics: WorkerMetrics, logger: Logger
    ) {
        self.context = context
        self.redis = redis
        self.consumer = consumer
        self.processor = processor
        self.limiter = limiter
        self.batchSize = batchSize
        self.readLinger = readLinger
        self.visibilityTimeout = visibilityTimeout
        self.metrics = metrics
        self.logger = logger.child("consumer", metadata: ["stream": context.stream])
    }

    /// Creates the consumer group if needed (from the stream's start, so entries
    /// added before any worker existed are read), then starts the loops. A Redis that
    /// does not answer yet does not stop the worker from starting (as it does not stop
    /// the ingress): the loops retry, and make the group once Redis answers that it is
    /// missing.
    func start() async {
        do {
            try await ensureGroup()
        } catch {
            logger.warning("cannot create the consumer group yet; reading retries", metadata: ["error": "\(error)"])
        }
        // The reader and the claimer wait for the resumption: until it ends, whatever
        // is pending under this name was left by a predecessor, and neither takes any.
        let resumption = Task { await self.resumeOwnPending() }
        let loops = [
            resumption,
            Task {
                await resumption.value
                await self.readLoop()
            },
            Task {
                await resumption.value
                await self.claimLoop()
            },
            Task {
                await resumption.value
                await self.orphanLoop()
            },
            Task { await self.retryLoop() },
        ]
        tasks.withLock { $0 = loops }
    }

    /// Stops reading and claiming; returns when the loops ended. Work already
    /// started goes on (the application drains it).
    func stop() async {
        stopping.store(true, ordering: .relaxed)
        for task in tasks.withLock({ $0 }) { await task.value }
    }

    private var isStopping: Bool { stopping.load(ordering: .relaxed) }

    func ensureGroup() async throws {
        do {
            _ = try await redis.send("XGROUP", "CREATE", context.stream, context.group, "0", "MKSTREAM")
        } catch let error as RedisError where error.serverPrefix == "BUSYGROUP" {
            // Another worker made it.
        }
    }

    // MARK: Loops

    /// Entries to ask for with `permits` in hand: as many as can hold no more
    /// messages than that, the hot path's entries holding at most
    /// `HotPathScript.maximumBatch`. Smaller entries (light load, retries) make reads
    /// of fewer messages, which is when the worker is not busy.
    static func entryCount(permits: Int) -> Int {
        max(1, permits / HotPathScript.maximumBatch)
    }

    /// Whether the reader waits `readLinger` after a read of `messages` with `permits`
    /// in hand: when the read took at least half a full hot-path run's worth (16) but
    /// less than half what it could (the stream is busy, and was emptied). Reading again at once would
    /// take the next run or two alone; a moment later it takes what arrived meanwhile
    /// in one read, and the sends go to APNs in larger writes: less CPU per
    /// notification, for a wait of a few milliseconds while the worker is busy anyway.
    /// A read of fewer messages (light load: runs of a push or a few) is followed
    /// at once, so a lone push is not held up.
    static func lingers(afterReading messages: Int, of permits: Int) -> Bool {
        messages >= HotPathScript.maximumBatch / 2 && messages < permits / 2
    }

    private func readLoop() async {
        var failures = 0
        var expectedEntryBytes = 768
        while !isStopping {
            let granted = await limiter.acquire(upTo: batchSize, atLeast: max(1, min(batchSize, limiter.limit / 4)))
            guard granted > 0 else { return }
            if isStopping {
                limiter.abandonRead(granted)
                return
            }
            do {
                let read = StreamReadVisitor(deliveryCount: 1, expectedEntryBytes: expectedEntryBytes)
                let count = Self.entryCount(permits: granted)
                try await redis.send(
                    RedisCommand(
                        "XREADGROUP", "GROUP", context.group, consumer, "COUNT", count, "BLOCK",
                        Self.blockMilliseconds,
                        "STREAMS", context.stream, ">"),
                    timeout: .milliseconds(Self.blockMilliseconds + 5000), visitor: read)
                let entries = read.entries
                expectedEntryBytes = read.expectedEntryBytes
                failures = 0
                let messages = processor.start(entries, context: context)
                limiter.finishRead(granted: granted, messages: messages)
                if readLinger > .zero && Self.lingers(afterReading: messages, of: granted) {
                    try? await Task.sleep(for: readLinger)
                }
            } catch {
                limiter.abandonRead(granted)
                failures += 1
                if (error as? RedisError)?.serverPrefix == "NOGROUP" { try? await ensureGroup() }
                if failures == 1 || failures % 50 == 0 {
                    logger.warning("cannot read the queue", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// A claim script's reply: the next cursor and the entries claimed.
    static func claimed(_ reply: RedisReply) -> (cursor: String, entries: [StreamEntry]) {
        let parts = reply.array ?? []
        let entries = (parts.count > 1 ? parts[1].array ?? [] : []).compactMap { item -> StreamEntry? in
            guard let fields = item.array, fields.count >= 3, let id = fields[0].string else { return nil }
            return StreamEntry(
                id: id, fields: StreamEntryFields(fields[1].array?.compactMap(\.bytes) ?? []),
                deliveryCount: Int(fields[2].int ?? 1))
        }
        return (parts.first?.string ?? "", entries)
    }

    /// In-flight permits for a claim, or nil when stopping (none held then).
    private func claimPermits() async -> Int? {
        let granted = await limiter.acquire(upTo: batchSize)
        guard granted > 0 else { return nil }
        if isStopping {
            limiter.abandonRead(granted)
            return nil
        }
        return granted
    }

    /// Hands `entries`, taken back from a dead or silent consumer, to the processor
    /// with the permits `granted` for them; returns how many.
    private func start(claimed entries: [StreamEntry], granted: Int) -> Int {
        if !entries.isEmpty { metrics.claimed.increment(by: Double(entries.count)) }
        limiter.finishRead(granted: granted, messages: processor.start(entries, context: context))
        return entries.count
    }

    /// One line per pass, however many pages it took.
    private func logClaimed(_ count: Int, _ note: String) {
        if count > 0 { logger.info(note, metadata: ["entries": "\(count)"]) }
    }

    /// Sends again, at once, the entries pending for this worker's own name: a process
    /// of that name read them and died (a pod's container and a systemd unit keep their
    /// name across restarts). Other workers' entries wait for the visibility timeout,
    /// since their owner may still be sending them; so would these without this pass.
    /// Runs before the reader and the claimer start (`start()`), so it never takes back
    /// what this process read or claimed; tried again until Redis answers.
    private func resumeOwnPending() async {
        var cursor = "-"
        var resumed = 0
        defer { logClaimed(resumed, "resumed entries this worker's name left unacknowledged") }
        let failures = ThrottledLog(logger: logger, interval: .seconds(10))
        while !isStopping {
            guard let granted = await claimPermits() else { return }
            do {
                let reply = try await redis.run(
                    QueueScripts.claimOwn, keys: [context.stream],
                    arguments: [context.group, consumer, cursor, Self.entryCount(permits: granted)])
                let (next, entries) = Self.claimed(reply)
                // A line when it begins (a pass paced by permits can take a while, and
                // the process may not live to its end), one with the total at its end.
                if resumed == 0 && !entries.isEmpty {
                    logger.info("resuming entries this worker's name left unacknowledged")
                }
                resumed += start(claimed: entries, granted: granted)
                guard !next.isEmpty else { return }
                cursor = next
            } catch {
                limiter.abandonRead(granted)
                // Whatever the reply (a script's error may not keep Redis's NOGROUP
                // prefix): the reader waits for this pass, so a missing group must not
                // keep it failing. Making one that exists is answered BUSYGROUP.
                try? await ensureGroup()
                failures.warning("cannot resume this worker's pending entries", error: error)
                try? await sleepUnlessStopping(.milliseconds(200))
            }
        }
    }

    private func claimLoop() async {
        let interval = min(max(visibilityTimeout / 2, .milliseconds(250)), .seconds(30))
        var lastCleanup = ContinuousClock.now
        let idle = visibilityTimeout.inWholeMilliseconds
        while !isStopping {
            try? await sleepUnlessStopping(interval)
            var cursor = "0-0"
            var claimed = 0
            defer { logClaimed(claimed, "claimed entries left unacknowledged") }
            repeat {
                guard let granted = await claimPermits() else { return }
                do {
                    let count = Self.entryCount(permits: granted)
                    let reply = try await redis.run(
                        QueueScripts.claim, keys: [context.stream],
                        arguments: [context.group, consumer, idle, cursor, count])
                    let entries: [StreamEntry]
                    (cursor, entries) = Self.claimed(reply)
                    cursor = cursor.isEmpty ? "0-0" : cursor
                    claimed += start(claimed: entries, granted: granted)
                } catch {
                    limiter.abandonRead(granted)
                    if (error as? RedisError)?.serverPrefix == "NOGROUP" { try? await ensureGroup() }
                    logger.warning("cannot claim entries", metadata: ["error": "\(error)"])
                    break
                }
            } while cursor != "0-0" && !isStopping
            if ContinuousClock.now - lastCleanup >= Self.consumerCleanupInterval {
                lastCleanup = .now
                await removeIdleConsumers()
            }
        }
    }

    /// How long an entry pending under this worker's name and held by no task here
    /// waits before the sweep takes it back: far longer than a read's or a claim's
    /// answer takes to arrive and be held, so the sweep never takes one on its way.
    /// Also how often the sweep looks.
    static let orphanAge: Duration = .seconds(5)

    /// Takes back, every `orphanAge`, the entries pending under this worker's name
    /// that no task here holds. A read that timed out while Redis stalled still ran
    /// once Redis went on, handing the first new entries to this name; nothing would
    /// send them before the claimer's visibility timeout (a probe saw pushes a minute
    /// late, some expired).
    private func orphanLoop() async {
        let idle = min(Self.orphanAge, visibilityTimeout).inWholeMilliseconds
        let failures = ThrottledLog(logger: logger, interval: .seconds(60))
        while !isStopping {
            try? await sleepUnlessStopping(Self.orphanAge)
            guard !isStopping else { return }
            do {
                let taken = try await takeOrphans(idleMilliseconds: idle)
                logClaimed(taken, "took back entries a lost read or claim left under this worker's name")
            } catch {
                failures.warning("cannot look for entries left under this worker's name", error: error)
            }
        }
    }

    /// One page of orphans, idle at least `idleMilliseconds`: found with `XPENDING`,
    /// taken with `XCLAIM` (which skips any that became active meanwhile). The page
    /// holds every entry this process can hold (each holds a permit until it is let go)
    /// and a read's worth more.
    private func takeOrphans(idleMilliseconds idle: Int) async throws -> Int {
        let page = limiter.limit + batchSize
        let pending = try await redis.send(
            "XPENDING", context.stream, context.group, "IDLE", idle, "-", "+", page, consumer)
        var deliveries: [String: Int] = [:]
        for item in pending.array ?? [] {
            guard let parts = item.array, parts.count >= 4, let id = parts[0].string else { continue }
            deliveries[id] = Int(parts[3].int ?? 0)
        }
        let orphans = context.held.notHeld(Array(deliveries.keys)).sorted()
        guard !orphans.isEmpty, let granted = await claimPermits() else { return 0 }
        let ids: [any RedisValueConvertible] = Array(orphans.prefix(Self.entryCount(permits: granted)))
        let reply: RedisReply
        do {
            reply = try await redis.send(
                RedisCommand("XCLAIM", arguments: [context.stream, context.group, consumer, idle] + ids))
        } catch {
            limiter.abandonRead(granted)
            throw error
        }
        let entries = (reply.array ?? []).compactMap { item -> StreamEntry? in
            guard let fields = item.array, fields.count >= 2, let id = fields[0].string else { return nil }
            return StreamEntry(
                id: id, fields: StreamEntryFields(fields[1].array?.compactMap(\.bytes) ?? []),
                deliveryCount: (deliveries[id] ?? 0) + 1)
        }
        return start(claimed: entries, granted: granted)
    }

    /// How often, and after how long without activity, consumers with nothing
    /// pending are removed from the group (each pod or process adds one by name).
    static let consumerCleanupInterval: Duration = .seconds(600)
    static let consumerIdleLimitMilliseconds: Int64 = 24 * 3_600_000

    /// Removes consumers of workers long gone: nothing pending (their entries were
    /// claimed) and idle for a day. Each is checked again where it is removed
    /// (`removeIdleConsumer`): `DELCONSUMER` drops a consumer's pending entries, and a
    /// worker restarted under the name may have read some since the list was read.
    private func removeIdleConsumers() async {
        guard let reply = try? await redis.send("XINFO", "CONSUMERS", context.stream, context.group) else { return }
        for consumer in reply.array ?? [] {
            let pairs = consumer.array ?? []
            var info: [String: RedisReply] = [:]
            var index = 0
            while index + 1 < pairs.count {
                if let key = pairs[index].string { info[key] = pairs[index + 1] }
                index += 2
            }
            guard let name = info["name"]?.string, name != self.consumer, info["pending"]?.int == 0,
                let idle = info["idle"]?.int, idle > Self.consumerIdleLimitMilliseconds
            else { continue }
            _ = try? await redis.run(
                Self.removeIdleConsumer, keys: [context.stream],
                arguments: [context.group, name, Self.consumerIdleLimitMilliseconds])
        }
    }

    /// Deletes consumer ARGV[2] of group ARGV[1] only if it has nothing pending and has
    /// been idle over ARGV[3] ms, read in the same run: 1 if deleted, else 0.
    static let removeIdleConsumer = RedisScript(
        source: """
            for _, consumer in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
                local info = {}
                for i = 1, #consumer, 2 do info[consumer[i]] = consumer[i + 1] end
                if info['name'] == ARGV[2] then
                    if info['pending'] == 0 and info['idle'] > tonumber(ARGV[3]) then
                        redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
                        return 1
                    end
                    return 0
                end
            end
            return 0
            """)

    private func retryLoop() async {
        let failures = ThrottledLog(logger: logger, interval: .seconds(10))
        while !isStopping {
            try? await sleepUnlessStopping(.milliseconds(200))
            do {
                while !isStopping {
                    let moved = try await redis.run(
                        QueueScripts.promoteRetries, keys: [context.keys.retrySchedule, context.stream],
                        arguments: [1000])
                    if (moved.int ?? 0) < 1000 { break }
                }
            } catch {
                // Five a second while Redis is away.
                failures.warning("cannot move due retries", error: error)
            }
        }
    }

    private func sleepUnlessStopping(_ duration: Duration) async throws {
        let end = ContinuousClock.now + duration
        while !isStopping && ContinuousClock.now < end {
            try await Task.sleep(for: min(.milliseconds(100), end - .now))
        }
    }
}
