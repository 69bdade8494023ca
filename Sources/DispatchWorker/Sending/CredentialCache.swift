import Shared
import Synchronization

/// The APNs credentials messages name, read from Postgres (`PushCredentialReader`:
/// the sealed `.p8` opened with `CREDENTIAL_KEY`) and kept for a while, so a burst
/// of messages costs one query per credential. Concurrent misses share one read.
/// A credential found rejected, or marked so after APNs refused its token, fails
/// fast until the entry expires and Postgres says it was restored or replaced.
/// When Postgres cannot be read, the answer read before stays in use (checked again
/// every `failureLifetime`): sends do not depend on Postgres, and a credential
/// revoked meanwhile is still caught by APNs's refusal.
final class CredentialCache: Sendable {
    enum Lookup: Sendable {
        case usable(APNsCredential)
        /// No credential chosen, deleted, or its key does not open: credential_missing.
        case missing
        /// Flagged rejected: credential_rejected.
        case rejected
        /// Postgres did not answer: try the message again later.
        case unavailable

        var isUnavailable: Bool {
            if case .unavailable = self { true } else { false }
        }
    }

    private enum Entry {
        case loading(Task<Lookup, Never>)
        case ready(Lookup, expires: ContinuousClock.Instant)
    }

    private let reader: PushCredentialReader
    private let lifetime: Duration
    private let failureLifetime: Duration
    private let logger: Logger
    /// While Postgres is away every send asks again: one line now and then, not one per batch.
    private let readFailureLog: ThrottledLog
    private let entries = Mutex<[String: Entry]>([:])

    init(
        reader: PushCredentialReader, lifetime: Duration = .seconds(60), failureLifetime: Duration = .seconds(10),
        logger: Logger
    ) {
        self.reader = reader
        self.lifetime = lifetime
        self.failureLifetime = failureLifetime
        self.logger = logger
        readFailureLog = ThrottledLog(logger: logger, interval: .seconds(10))
    }

    func lookup(_ id: String) async -> Lookup {
        guard !id.isEmpty else { return .missing }
        let now = ContinuousClock.now
        let found: Entry = entries.withLock { entries in
            switch entries[id] {
            case .ready(let lookup, let expires) where expires > now:
                return .ready(lookup, expires: expires)
            case .loading(let task):
                return .loading(task)
            case .ready(let earlier, _):
                let task = Task { await self.load(id, earlier: earlier) }
                entries[id] = .loading(task)
                return .loading(task)
            case nil:
                let task = Task { await self.load(id, earlier: nil) }
                entries[id] = .loading(task)
                return .loading(task)
            }
        }
        switch found {
        case .ready(let lookup, _): return lookup
        case .loading(let task): return await task.value
        }
    }

    /// APNs refused the credential: fail its messages fast from now on.
    func markRejected(_ id: String) {
        let expires = ContinuousClock.now + lifetime
        entries.withLock { $0[id] = .ready(.rejected, expires: expires) }
    }

    /// Reads the credential; `earlier` is the expired answer, kept if Postgres fails.
    private func load(_ id: String, earlier: Lookup?) async -> Lookup {
        let lookup: Lookup
        do {
            let stored = try await reader.credential(id: id)
            lookup =
                stored.status == .active
                ? .usable(
                    APNsCredential(id: id, teamID: stored.teamID, keyID: stored.keyID, privateKey: stored.privateKey))
                : .rejected
        } catch let failure as PushCredentialReader.Failure {
            logger.warning("credential unusable", metadata: ["credential": id, "error": failure.description])
            lookup = .missing
        } catch {
            lookup = .unavailable
            if let earlier, !earlier.isUnavailable {
                readFailureLog.warning("cannot read credentials; using what was read before", error: error)
                entries.withLock { $0[id] = .ready(earlier, expires: .now + failureLifetime) }
                return earlier
            }
            readFailureLog.warning("cannot read credentials; their messages wait", error: error)
        }
        let expires: ContinuousClock.Instant
        switch lookup {
        case .usable, .rejected: expires = .now + lifetime
        case .missing: expires = .now + failureLifetime
        case .unavailable: expires = .now  // the next message asks again
        }
        entries.withLock { $0[id] = .ready(lookup, expires: expires) }
        return lookup
    }
}
