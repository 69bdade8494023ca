import Foundation
import Shared
import Synchronization

/// The simulator's shared mutable state, behind one `Mutex`: the rules in force,
/// injected faults, recordings and counters. A request takes the lock once, to
/// count (and record) its answer: `beginRequest` reads atomics mirroring whether
/// faults are queued, the latency and the rules' version, and copies the rules
/// only after they changed. Everything per-connection lives on the connection's loop.
final class SimulatorState: Sendable {
    /// What a request needs to be judged, taken at its start.
    struct RequestContext: Sendable {
        /// Answer with this instead of judging the request (an injected fault).
        let fault: APNsRejection?
        let rules: SimulatorRules
        let latencyMilliseconds: Int
    }

    struct Fault: Sendable, Equatable {
        let rejection: APNsRejection
        var remaining: Int
    }

    struct Counters: Sendable {
        var accepted = 0
        var rejected: [String: Int] = [:]
        var connectionsOpened = 0
        var connectionsOpen = 0
        /// Distinct provider tokens accepted by some connection.
        var providerTokens: Set<String> = []
        /// ES256 signature checks (one per connection and token when caching works).
        var providerTokenVerifications = 0
        /// Streams above a GOAWAY's last-stream-id, dropped unanswered.
        var streamsRefusedAfterGoAway = 0
        var faultsInjected = 0
        var recordingsDropped = 0
        var goAwaysSent = 0
        /// The most streams one connection had open at once (HTTP/2 level, counted when a
        /// request has fully arrived): above 1 shows a client used the raised limit, and it
        /// never exceeds `maxConcurrentStreams` for a client that respects the limit.
        var peakOpenStreams = 0
    }

    private struct Storage: Sendable {
        var rules: SimulatorRules
        var faults: [Fault] = []
        var latencyMilliseconds = 0
        var recordings: RecordingRing
        var nextSequence = 1
        var nextConnectionID = 1
        var counters = Counters()

        init(configuration: SimulatorConfiguration) {
            rules = SimulatorRules(configuration: configuration)
            recordings = RecordingRing(capacity: configuration.maxRecordedNotifications)
        }
    }

    /// A connection's copy of the rules and the version it was taken at.
    struct RulesSnapshot {
        fileprivate(set) var version: UInt64 = .max
        fileprivate(set) var rules: SimulatorRules?
    }

    let configuration: SimulatorConfiguration
    private let storage: Mutex<Storage>
    // Mirrors of `storage`, written under its lock, read without it per request.
    private let faultsQueued = Atomic<Bool>(false)
    private let latency = Atomic<Int>(0)
    private let rulesVersion = Atomic<UInt64>(0)
    private let heldResponses = Atomic<Int>(0)

    init(configuration: SimulatorConfiguration) {
        self.configuration = configuration
        storage = Mutex(Storage(configuration: configuration))
    }

    // MARK: Hot path

    /// What the next request is judged by; `snapshot` is the connection's copy of
    /// the rules, refreshed here when they changed.
    func beginRequest(rules snapshot: inout RulesSnapshot) -> RequestContext {
        var fault: APNsRejection?
        if faultsQueued.load(ordering: .acquiring) {
            fault = storage.withLock { storage in
                guard !storage.faults.isEmpty else { return nil }
                let fault = storage.faults[0].rejection
                storage.faults[0].remaining -= 1
                if storage.faults[0].remaining <= 0 { storage.faults.removeFirst() }
                storage.counters.faultsInjected += 1
                faultsQueued.store(!storage.faults.isEmpty, ordering: .releasing)
                return fault
            }
        }
        let version = rulesVersion.load(ordering: .acquiring)
        if snapshot.version != version || snapshot.rules == nil {
            snapshot.rules = storage.withLock { $0.rules }
            snapshot.version = version
        }
        return RequestContext(
            fault: fault, rules: snapshot.rules!, latencyMilliseconds: latency.load(ordering: .acquiring))
    }

    /// Counts a rejection.
    func finishRequest(rejected rejection: APNsRejection) {
        storage.withLock { $0.counters.rejected[rejection.reason, default: 0] += 1 }
    }

    /// Counts and records an accepted notification (the oldest recording goes
    /// when `maxRecordedNotifications` are kept).
    func finishRequest(
        accepted: APNsRequestValidator.Accepted, apnsID: APNsID, headers: [HTTP2Header], payload: [UInt8],
        connectionID: Int
    ) {
        let receivedAt = Int64(Date().timeIntervalSince1970 * 1_000_000)
        storage.withLock { storage in
            storage.counters.accepted += 1
            guard storage.recordings.capacity > 0 else { return }
            let metadata = RecordingRing.Metadata(
                sequence: storage.nextSequence, receivedAtMicroseconds: receivedAt, responseID: apnsID,
                teamID: accepted.teamID, keyID: accepted.keyID, connectionID: connectionID)
            storage.nextSequence += 1
            if storage.recordings.append(metadata, headers: headers, payload: payload) {
                storage.counters.recordingsDropped += 1
            }
        }
    }

    /// A connection verified a token's signature; `accepted` if it now uses it.
    func noteTokenVerification(count: Int, accepted token: String?) {
        storage.withLock { storage in
            storage.counters.providerTokenVerifications += count
            if let token { storage.counters.providerTokens.insert(token) }
        }
    }

    /// A connection had `count` streams open at once.
    func notePeakOpenStreams(_ count: Int) {
        storage.withLock { $0.counters.peakOpenStreams = max($0.counters.peakOpenStreams, count) }
    }

    func noteStreamRefusedAfterGoAway() { storage.withLock { $0.counters.streamsRefusedAfterGoAway += 1 } }

    /// Returns the new connection's id.
    func connectionOpened() -> Int {
        storage.withLock { storage in
            storage.counters.connectionsOpened += 1
            storage.counters.connectionsOpen += 1
            defer { storage.nextConnectionID += 1 }
            return storage.nextConnectionID
        }
    }

    func connectionClosed() { storage.withLock { $0.counters.connectionsOpen -= 1 } }

    func noteGoAways(_ count: Int) { storage.withLock { $0.counters.goAwaysSent += count } }

    // MARK: Control API

    var counters: Counters { storage.withLock { $0.counters } }
    var rules: SimulatorRules { storage.withLock { $0.rules } }
    var faults: [Fault] { storage.withLock { $0.faults } }
    var latencyMilliseconds: Int { storage.withLock { $0.latencyMilliseconds } }
    var recordedCount: Int { storage.withLock { $0.recordings.count } }
    /// Requests received and judged whose responses injected latency still holds
    /// back: notifications on their way, as the sender sees them.
    var responsesHeld: Int { heldResponses.load(ordering: .acquiring) }

    func holdResponse() { heldResponses.add(1, ordering: .acquiringAndReleasing) }
    func releaseHeldResponses(_ count: Int) {
        if count > 0 { heldResponses.subtract(count, ordering: .acquiringAndReleasing) }
    }

    /// Recordings in order, optionally only those after `sequence` and for one device token (any case).
    func recordings(after sequence: Int = 0, deviceToken: String? = nil, limit: Int = .max) -> [RecordedNotification] {
        storage.withLock { $0.recordings.recordings(after: sequence, deviceToken: deviceToken, limit: limit) }
    }

    func clearRecordings() {
        storage.withLock { $0.recordings.removeAll() }
    }

    /// The next `count` requests (on any connection) answer `rejection`, after
    /// faults already queued.
    func injectFault(_ rejection: APNsRejection, count: Int) {
        storage.withLock {
            $0.faults.append(Fault(rejection: rejection, remaining: count))
            faultsQueued.store(true, ordering: .releasing)
        }
    }

    func clearFaults() {
        storage.withLock {
            $0.faults = []
            faultsQueued.store(false, ordering: .releasing)
        }
    }

    func setLatency(milliseconds: Int) {
        storage.withLock {
            $0.latencyMilliseconds = milliseconds
            latency.store(milliseconds, ordering: .releasing)
        }
    }

    func updateRules<Result>(_ change: (inout SimulatorRules) -> Result) -> Result {
        storage.withLock {
            defer { rulesVersion.add(1, ordering: .releasing) }
            return change(&$0.rules)
        }
    }

    /// Back to the configuration file: rules, faults, latency, recordings and
    /// counters (except the open-connection count, which stays true; connection
    /// ids and recording sequence numbers keep counting up).
    func reset() {
        storage.withLock { storage in
            let open = storage.counters.connectionsOpen
            var fresh = Storage(configuration: configuration)
            // Connections cache verified tokens by generation: move past every old one.
            fresh.rules.keyGeneration = storage.rules.keyGeneration &+ 1
            fresh.counters.connectionsOpen = open
            fresh.nextConnectionID = storage.nextConnectionID
            fresh.nextSequence = storage.nextSequence
            storage = fresh
            faultsQueued.store(false, ordering: .releasing)
            latency.store(0, ordering: .releasing)
            rulesVersion.add(1, ordering: .releasing)
        }
    }
}
