import Shared
import Synchronization

/// Raises the circuit flag (`RedisKeys.circuit`) the ingress reads, so it answers
/// 502 (1007) instead of queueing work that cannot be delivered: after
/// `threshold` consecutive sends for one credential/environment failed for reasons
/// that are not the message's (connection, timeout, 5xx). While failures go on the
/// flag is renewed (it lives `lifetimeSeconds`, so a worker that dies does not leave
/// it up for long); the next success for that credential/environment in this
/// process clears it. Within a lifetime of its start, a process's first success for a
/// credential/environment also deletes the flag whoever raised it: one left by a
/// worker that stopped or crashed would otherwise keep the ingress answering 502 until
/// it expires while APNs takes notifications again; a peer that still fails raises it
/// again at its next renewal (within a third of the lifetime). A stopping worker
/// (`stop`) takes down the flags it holds and raises none: it sends nothing new, so
/// the timeouts of its last sends say nothing of APNs now, and no success of its own
/// would come to clear a flag they raised.
final class CircuitBreaker: Sendable {
    private struct Circuit {
        var failures = 0
        var raised = false
        var lastWrite: ContinuousClock.Instant?
    }

    private let redis: RedisClient
    private let threshold: Int
    private let lifetimeSeconds: Int
    private let logger: Logger
    private let onRaise: @Sendable () -> Void
    private let circuits = Mutex<[String: Circuit]>([:])
    /// Whether `circuits` holds anything: the check every successful send makes,
    /// without taking the lock (one credential's failures are rare).
    private let tracking = Atomic<Bool>(false)
    /// For the first lifetime after the start: successes clear flags left by
    /// another process, once per flag (`inheritedCleared`).
    private let clearingInherited = Atomic<Bool>(true)
    private let inheritedCleared = Mutex<Set<String>>([])
    /// The last flag write handed to Redis. Each write waits for the one before it,
    /// so a renewal sent just before the clearing success cannot land after its `DEL`
    /// and leave the flag up with nothing left to clear it.
    private let lastWrite = Mutex<Task<Bool, Never>?>(nil)
    /// Set by `stop`: failures no longer raise or renew a flag.
    private let stopped = Atomic<Bool>(false)

    init(
        redis: RedisClient, threshold: Int, lifetimeSeconds: Int, logger: Logger,
        onRaise: @escaping @Sendable () -> Void = {}
    ) {
        self.redis = redis
        self.threshold = threshold
        self.lifetimeSeconds = lifetimeSeconds
        self.logger = logger
        self.onRaise = onRaise
        Task { [weak self, lifetimeSeconds] in
            try? await Task.sleep(for: .seconds(lifetimeSeconds))
            self?.clearingInherited.store(false, ordering: .relaxed)
        }
    }

    /// A send for `credential`/`environment` failed for a reason not the message's.
    func failure(credential: String, environment: String, keys: RedisKeys) {
        let name = keys.circuit(credential: credential, environment: environment)
        let now = ContinuousClock.now
        let (writes, first) = circuits.withLock { circuits -> (Bool, Bool) in
            var circuit = circuits[name] ?? Circuit()
            circuit.failures += 1
            tracking.store(true, ordering: .relaxed)
            defer { circuits[name] = circuit }
            guard circuit.failures >= threshold, !stopped.load(ordering: .relaxed) else { return (false, false) }
            // Renew at a third of the lifetime.
            if let last = circuit.lastWrite, now - last < .seconds(lifetimeSeconds) / 3 { return (false, false) }
            let first = !circuit.raised
            circuit.raised = true
            circuit.lastWrite = now
            return (true, first)
        }
        guard writes else { return }
        if first {
            onRaise()
            logger.warning(
                "APNs keeps failing; circuit flag raised",
                metadata: ["credential": credential, "apns.environment": environment])
        }
        // Skipped when `stop` came in between: its `DEL` may be queued before this.
        write(RedisCommand("SET", name, "1", "EX", lifetimeSeconds)) { [self] in stopped.load(ordering: .relaxed) }
    }

    /// Whether any credential/environment has failures counted; when not, a
    /// success has nothing to clear and callers may skip `success`.
    var isTracking: Bool { tracking.load(ordering: .relaxed) }

    /// Whether successes may still clear flags another process left (`clearInherited`):
    /// callers on the hot path check it before building its arguments.
    var isClearingInherited: Bool { clearingInherited.load(ordering: .relaxed) }

    /// A send for `credential`/`environment` got an answer from APNs.
    func success(credential: String, environment: String, keys: RedisKeys) async {
        guard isTracking else {
            clearInherited(credential: credential, environment: environment, keys: keys)
            return
        }
        let name = keys.circuit(credential: credential, environment: environment)
        let wasRaised = circuits.withLock { circuits -> Bool in
            guard let circuit = circuits[name] else { return false }
            circuits[name] = nil
            if circuits.isEmpty { tracking.store(false, ordering: .relaxed) }
            return circuit.raised
        }
        guard wasRaised else {
            clearInherited(credential: credential, environment: environment, keys: keys)
            return
        }
        logger.notice(
            "APNs answers again; circuit flag cleared",
            metadata: ["credential": credential, "apns.environment": environment])
        _ = await write(RedisCommand("DEL", name)).value
    }

    /// A success while no failure is counted for its credential/environment (callers
    /// that skip `success` call this): within a lifetime of the start, the first one
    /// for each deletes the flag in case another process (a predecessor) left it up.
    /// Does not wait for Redis.
    func clearInherited(credential: String, environment: String, keys: RedisKeys) {
        guard isClearingInherited else { return }
        let name = keys.circuit(credential: credential, environment: environment)
        guard inheritedCleared.withLock({ $0.insert(name).inserted }) else { return }
        // Not over a flag this process raised meanwhile (the check runs in the write's
        // turn, after any `SET` of it handed to Redis before).
        let deletion = write(RedisCommand("DEL", name)) { [self] in
            circuits.withLock { $0[name]?.raised ?? false }
        }
        Task { [logger] in
            guard await deletion.value else { return }
            logger.notice(
                "APNs answers; circuit flag left by another process cleared",
                metadata: ["credential": credential, "apns.environment": environment])
        }
    }

    /// Sends `command` once the previous flag write has been answered, unless `skip`
    /// says so then. The task answers whether Redis answered 1 (a `DEL` that deleted).
    @discardableResult
    private func write(_ command: RedisCommand, skip: @escaping @Sendable () -> Bool = { false }) -> Task<Bool, Never> {
        lastWrite.withLock { last in
            let previous = last
            let task = Task { [redis] in
                _ = await previous?.value
                if skip() { return false }
                return (try? await redis.send(command))?.int == 1
            }
            last = task
            return task
        }
    }

    /// The worker stops taking work: the flags this process holds up are deleted
    /// (a peer that still fails raises them again at its next renewal), and none is
    /// raised or renewed from now on. Waits for Redis's answers.
    func stop() async {
        stopped.store(true, ordering: .relaxed)
        let held = circuits.withLock { circuits -> [String] in
            let names = circuits.filter(\.value.raised).map(\.key)
            for name in names { circuits[name]?.raised = false }
            return names
        }
        guard !held.isEmpty else { return }
        for name in held { _ = await write(RedisCommand("DEL", name)).value }
        logger.notice(
            "stopping; the circuit flags this worker held are taken down", metadata: ["flags": "\(held.count)"])
    }

    /// Whether this process currently holds the flag up (tests, metrics).
    func isRaised(credential: String, environment: String, keys: RedisKeys) -> Bool {
        circuits.withLock { $0[keys.circuit(credential: credential, environment: environment)]?.raised ?? false }
    }
}
