import Foundation
import Shared
import Synchronization

/// The APNs credentials messages name, read from Postgres (`PushCredentialReader`:
/// the sealed `.p8` opened with `CREDENTIAL_KEY`) and kept for a while, so a burst
/// of messages costs one query per credential. Concurrent misses share one read.
/// A credential found rejected, or marked so after APNs refused its token, fails
/// fast until the entry expires and Postgres says it was restored or replaced, but
/// only for messages accepted before that answer: the ingress queues a push only while
/// the app's credential is active, so a message accepted later says it may have been
/// restored meanwhile (`POST /credentials/{id}/verify`), and Postgres is asked again
/// instead of failing it for good: at most once a second, so such a message that
/// comes within the second waits (`rechecking`) and tries again. (The comparison
/// trusts the ingress's and the worker's clocks to agree.)
/// When Postgres cannot be read, the answer read before stays in use (checked again
/// every `failureLifetime`): sends do not depend on Postgres, and a credential
/// revoked meanwhile is still caught by APNs's refusal. A read that has not answered
/// within `readWait` (a frozen server, a lock) counts as such for the sends waiting
/// on it; it goes on, and its answer is kept when it comes. After a read failed,
/// sends with an answer read before do not wait for new reads until Postgres answers
/// again (`readPause`). A credential with no answer to fall back on is asked for
/// again at most every `unavailableLifetime`: its messages wait and retry anyway,
/// and a read per message would hammer a Postgres that refuses connections.
final class CredentialCache: Sendable {
    enum Lookup: Sendable {
        case usable(APNsCredential)
        /// No credential chosen, or deleted: credential_missing.
        case missing
        /// Its sealed key does not open with this worker's `CREDENTIAL_KEY`, and no
        /// credential has opened in this process yet: most likely a deployment mistake
        /// of ours (a key other than the ingress's), not the app owner's, so its
        /// messages wait (until their TTL) instead of failing for good. Once another
        /// credential has opened, the key is right for those: `damaged`.
        case unopenable
        /// Its sealed key does not open while others do: the row is damaged, or was
        /// sealed with another key (an ingress with another `CREDENTIAL_KEY`). Its
        /// messages fail as `credential_missing`, counted apart
        /// (`credential_unopenable`) and logged as errors, so an alert sees them.
        case damaged
        /// Flagged rejected: credential_rejected.
        case rejected
        /// Flagged rejected, but by an answer older than the message, and Postgres was
        /// asked under a second ago: try the message again shortly.
        case rechecking
        /// Postgres did not answer: try the message again later.
        case unavailable

        var isUnavailable: Bool {
            if case .unavailable = self { true } else { false }
        }
    }

    private enum Entry {
        /// A read under way since `started`, and the answer it replaces (nil for a first read).
        case loading(Task<Lookup, Never>, earlier: Lookup?, started: ContinuousClock.Instant)
        /// `decidedAt`: when the answer was read or marked, UNIX ms (this host's clock,
        /// compared with the ingress's `acceptedAt`).
        case ready(Lookup, expires: ContinuousClock.Instant, decidedAt: Int64)
    }

    private let reader: PushCredentialReader
    private let lifetime: Duration
    private let failureLifetime: Duration
    private let unavailableLifetime: Duration
    private let recheckIntervalMilliseconds: Int64 = 1000
    /// How long a send waits for a read before it goes on as if Postgres had failed.
    static let readWait: Duration = .seconds(2)
    /// Set when a read failed (or outlasted `readWait`), until a probe in the
    /// background finds Postgres answering: meanwhile a send with an answer read before
    /// does not wait for a new read at all, since while Postgres stays away each
    /// credential's reads keep failing, and each would hold its sends `readWait` again.
    private let readPause: PostgresPause
    /// UNIX milliseconds, as the ingress stamps `acceptedAt`; tests move it by hand.
    private let clock: @Sendable () -> Int64
    private let logger: Logger
    /// While Postgres is away every send asks again: one line now and then, not one per batch.
    private let readFailureLog: ThrottledLog
    /// A wrong `CREDENTIAL_KEY` fails every credential, again every `failureLifetime`.
    private let keyFailureLog: ThrottledLog
    private let entries = Mutex<[String: Entry]>([:])
    /// Whether any credential opened with this process's `CREDENTIAL_KEY` (`unopenable`).
    private let keyOpenedOne = Atomic<Bool>(false)

    init(
        reader: PushCredentialReader, lifetime: Duration = .seconds(60), failureLifetime: Duration = .seconds(10),
        unavailableLifetime: Duration = .seconds(1), logger: Logger,
        clock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
    ) {
        self.clock = clock
        self.reader = reader
        readPause = PostgresPause(postgres: reader.postgres)
        self.lifetime = lifetime
        self.failureLifetime = failureLifetime
        self.unavailableLifetime = unavailableLifetime
        self.logger = logger
        readFailureLog = ThrottledLog(logger: logger, interval: .seconds(10))
        keyFailureLog = ThrottledLog(logger: logger, interval: .seconds(60))
    }

    /// The credential for messages accepted at `acceptedAt` (UNIX ms) or before.
    func lookup(_ id: String, acceptedAt: Int64 = 0) async -> Lookup {
        guard !id.isEmpty else { return .missing }
        let now = ContinuousClock.now
        let found: Entry = entries.withLock { entries in
            /// A read of `id` replacing `earlier`, recorded as under way.
            func startRead(replacing earlier: Lookup?) -> Entry {
                let entry = Entry.loading(
                    Task { await self.load(id, earlier: earlier) }, earlier: earlier, started: now)
                entries[id] = entry
                return entry
            }
            let current = entries[id]
            switch current {
            case .ready(.rejected, let expires, let decidedAt) where acceptedAt > decidedAt:
                // Accepted after the rejection was seen: read it again, or, within the
                // second since the last read, wait for the next one.
                guard clock() - decidedAt >= recheckIntervalMilliseconds else {
                    return .ready(.rechecking, expires: expires, decidedAt: decidedAt)
                }
                return startRead(replacing: .rejected)
            case .ready(_, let expires, _) where expires > now: return current!
            case .loading: return current!
            case .ready(let earlier, _, _): return startRead(replacing: earlier)
            case nil: return startRead(replacing: nil)
            }
        }
        switch found {
        case .ready(let lookup, _, _): return lookup
        case .loading(let task, let earlier, let started):
            let fallback = earlier.flatMap { $0.isUnavailable ? nil : $0 }
            if let fallback, readPause.isPaused { return fallback }
            // Whoever comes while the read is under way waits what is left of
            // `readWait` since it started: a read that hangs delays each send once, not
            // each by the whole wait.
            let left = Self.readWait - (ContinuousClock.now - started)
            if left > .zero, let answer = try? await task.value(waitingAtMost: left) { return answer }
            readPause.failed()
            // As `load` answers when Postgres fails.
            return fallback ?? .unavailable
        }
    }

    /// APNs refused the credential: fail its messages fast from now on.
    func markRejected(_ id: String) {
        let expires = ContinuousClock.now + lifetime
        let decidedAt = clock()
        entries.withLock { $0[id] = .ready(.rejected, expires: expires, decidedAt: decidedAt) }
    }

    /// Reads the credential; `earlier` is the expired answer, kept if Postgres fails.
    private func load(_ id: String, earlier: Lookup?) async -> Lookup {
        // Stamped before the read: a restore committed while it runs must not count as
        // seen by its answer.
        let decidedAt = clock()
        let lookup: Lookup
        do {
            let stored = try await reader.credential(id: id)
            keyOpenedOne.store(true, ordering: .relaxed)
            lookup =
                stored.status == .active
                ? .usable(
                    APNsCredential(id: id, teamID: stored.teamID, keyID: stored.keyID, privateKey: stored.privateKey))
                : .rejected
        } catch let failure as PushCredentialReader.Failure where failure.code == .cannotOpen {
            if keyOpenedOne.load(ordering: .relaxed) {
                keyFailureLog.error(
                    "a push credential does not open while others do (damaged, or sealed with another"
                        + " CREDENTIAL_KEY); its messages fail", metadata: ["credential": id])
                lookup = .damaged
            } else {
                keyFailureLog.error(
                    "a push credential does not open with this worker's CREDENTIAL_KEY (not the ingress's?); its"
                        + " messages wait", metadata: ["credential": id])
                lookup = .unopenable
            }
        } catch let failure as PushCredentialReader.Failure {
            logger.warning("credential unusable", metadata: ["credential": id, "error": failure.description])
            lookup = .missing
        } catch {
            lookup = .unavailable
            readPause.failed()
            if let earlier, !earlier.isUnavailable {
                readFailureLog.warning("cannot read credentials; using what was read before", error: error)
                entries.withLock { $0[id] = .ready(earlier, expires: .now + failureLifetime, decidedAt: decidedAt) }
                return earlier
            }
            readFailureLog.warning("cannot read credentials; their messages wait", error: error)
        }
        let expires: ContinuousClock.Instant
        switch lookup {
        case .usable, .rejected: expires = .now + lifetime
        case .missing, .unopenable, .damaged: expires = .now + failureLifetime
        case .unavailable: expires = .now + unavailableLifetime
        case .rechecking: expires = .now  // never the answer of a read
        }
        entries.withLock { $0[id] = .ready(lookup, expires: expires, decidedAt: decidedAt) }
        return lookup
    }
}
