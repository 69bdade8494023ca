import Foundation
import Synchronization

/// Sends notifications to APNs over pooled HTTP/2 connections.
///
/// One event loop drives every connection; pools are keyed by (credential,
/// environment) and open `connectionsPerPool` connections lazily. A `send` fetches
/// the credential's shared provider token once, hands its requests to the loop in
/// one go and reports exactly one outcome per notification: an answer
/// (`APNsResponse`, whatever its status) or an `APNsClientError` (timeout,
/// overloaded, connection, shutdown…). An `ExpiredProviderToken` answer gets one
/// new token and one retry.
///
/// Nothing is logged per successful send; tokens and payloads are never logged.
public final class APNsClient: Sendable {
    public let configuration: Configuration
    private let loop: EventLoop
    private let ownsLoop: Bool
    private let tokens: any ProviderTokenStore
    private let counters = APNsClientCounters()
    /// The pools; touched only on `loop`.
    private let state: LoopConfined<APNsClientState>
    /// Requests on their way to the loop, and whether more are taken.
    private let inbox = Mutex(APNsClientInbox())

    /// `loop` is the event loop to run on; by default the client starts (and on
    /// `shutdown` stops) its own. Throws `untrustedServer` when the CA file cannot be read.
    public init(
        configuration: Configuration, tokens: any ProviderTokenStore, logger: Logger, loop: EventLoop? = nil
    ) throws(APNsClientError) {
        let context: TLSContext
        do {
            context = try TLSContext.client(extraCAFile: configuration.caFile, alpn: ["h2"])
        } catch {
            throw APNsClientError(.untrustedServer, "cannot set up TLS for APNs", underlying: error)
        }
        self.configuration = configuration
        self.tokens = tokens
        self.ownsLoop = loop == nil
        self.loop = loop ?? EventLoop(name: "apns")
        self.state = LoopConfined(
            APNsClientState(
                context: context, configuration: configuration, loop: self.loop, logger: logger.child("apns"),
                counters: counters))
    }

    /// Dropped without `shutdown`: the pools are closed and released on the loop,
    /// between its callbacks (a connection refers to its pool `unowned`, and a
    /// callback may resume the last holder of the client on another thread).
    deinit {
        let state = state
        loop.execute { state.value.abandon() }
    }

    /// Reports the outcome of the notification at `index` in a batch `send`.
    public typealias Completion = @Sendable (_ index: Int, _ result: Result<APNsResponse, APNsClientError>) -> Void

    /// Sends `notification` with `credential`'s provider token to `environment`.
    ///
    /// Returns APNs's answer, successful or not. Throws `APNsClientError`: `invalidRequest`
    /// (nothing sent), `overloaded` (the pool's queue is full; nothing sent), `timeout`,
    /// `connection`, `untrustedServer`, `shutdown`, `providerToken`, `protocolError`.
    public func send(
        _ notification: APNsNotification, credential: APNsCredential, environment: APNsEnvironment
    ) async throws -> APNsResponse {
        let batch = APNsNotificationBatch(CollectionOfOne(notification))
        try batch.validate(0)
        guard isAccepting else { throw Self.shutdownError }
        let key = APNsPoolKey(credentialID: credential.id, environment: environment)
        let token = try await providerToken { try await tokens.token(for: credential) }
        return try await withUnsafeThrowingContinuation { continuation in
            submit(
                [0],
                of: APNsSubmission(
                    client: self, credential: credential, key: key, token: token,
                    notifications: batch, isRefreshed: false,
                    completion: { _, result in continuation.resume(with: result) }))
        }
    }

    /// Sends every one of `notifications` with `credential`'s provider token to
    /// `environment`, and calls `completion` exactly once for each, with its index
    /// and the same answer or error the single `send` gives.
    ///
    /// Returns once the notifications are handed to the loop. `completion` mostly
    /// runs on the client's loop thread, so it must be quick and must not block;
    /// notifications failed before the hand-over (invalid, shutdown, no provider
    /// token) are reported on the caller's task before this returns.
    public func send(
        _ notifications: [APNsNotification], credential: APNsCredential, environment: APNsEnvironment,
        completion: @escaping Completion
    ) async {
        await send(
            APNsNotificationBatch(notifications), credential: credential, environment: environment,
            completion: completion)
    }

    /// `send(_:credential:environment:completion:)` of notifications already written
    /// into one buffer (what a sender of many builds); indices are the batch's.
    public func send(
        _ notifications: APNsNotificationBatch, credential: APNsCredential, environment: APNsEnvironment,
        completion: @escaping Completion
    ) async {
        var valid: [Int] = []
        valid.reserveCapacity(notifications.count)
        for index in notifications.indices {
            do throws(APNsClientError) {
                try notifications.validate(index)
                valid.append(index)
            } catch {
                completion(index, .failure(error))
            }
        }
        guard !valid.isEmpty else { return }
        guard isAccepting else { return fail(valid, Self.shutdownError, completion) }
        let token: String
        do {
            token = try await providerToken { try await tokens.token(for: credential) }
        } catch {
            return fail(valid, error, completion)
        }
        let key = APNsPoolKey(credentialID: credential.id, environment: environment)
        submit(
            valid,
            of: APNsSubmission(
                client: self, credential: credential, key: key, token: token, notifications: notifications,
                isRefreshed: false, completion: completion))
    }

    /// Counts of connection events, retries and failures so far.
    public var metrics: Metrics { counters.snapshot }

    /// Stops taking requests (`send` then fails with `shutdown`), lets queued and
    /// in-flight requests finish until `deadline`, fails what is left with
    /// `shutdown`, sends GOAWAY and closes every connection, then stops the loop
    /// if the client started it. A second call returns at once.
    public func shutdown(deadline: Duration = .seconds(10)) async {
        let first = inbox.withLock { inbox in
            defer { inbox.accepting = false }
            return inbox.accepting
        }
        guard first else { return }
        let (state, loop) = (state, loop)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            loop.execute { state.value.shutDown(deadline: .now + deadline) { continuation.resume() } }
        }
        guard ownsLoop else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                loop.shutdown()
                continuation.resume()
            }
        }
    }

    // MARK: Internals

    private static let shutdownError = APNsClientError(.shutdown, "the APNs client is shutting down")

    private var isAccepting: Bool { inbox.withLock { $0.accepting } }

    /// A token from the store. Signing failures arrive as `providerToken` errors;
    /// anything else is the store itself failing (Redis), which a later try may not meet.
    private func providerToken(_ fetch: () async throws -> String) async throws(APNsClientError) -> String {
        do {
            return try await fetch()
        } catch let error as APNsClientError {
            throw error
        } catch {
            throw APNsClientError(.providerTokenStore, "the provider token store failed", underlying: error)
        }
    }

    private func fail(_ indices: [Int], _ error: APNsClientError, _ completion: Completion) {
        for index in indices { completion(index, .failure(error)) }
    }

    /// Hands the requests for `indices` of `submission`'s notifications to the loop,
    /// or fails them with `shutdown`. Each is completed exactly once by its pending request.
    private func submit(_ indices: [Int], of submission: APNsSubmission) {
        let deadline = ContinuousClock.now + configuration.requestTimeout
        var requests: [APNsPendingRequest] = []
        requests.reserveCapacity(indices.count)
        for index in indices {
            requests.append(APNsPendingRequest(index: index, of: submission, deadline: deadline))
        }
        let handedOver = inbox.withLock { inbox in
            guard inbox.accepting else { return false }
            let wasEmpty = inbox.requests.isEmpty
            inbox.requests.append(contentsOf: requests)
            // Only the batch that finds the inbox empty asks the loop to take it, and
            // does so under the lock, so no hand-over can follow the loop's shutdown.
            if wasEmpty {
                loop.execute { [self] in state.value.takeRequests(from: self.inbox) }
            }
            return true
        }
        if !handedOver {
            for request in requests { request.fail(Self.shutdownError) }
        }
    }

    /// APNs refused the provider token of `submission`'s notification at `index`
    /// (`rejection`): one new token (when the policy allows one) and one retry, else that answer.
    func resend(
        _ index: Int, of submission: APNsSubmission, after response: APNsResponse, rejection: RejectedProviderToken
    ) async {
        let fresh: String
        do {
            fresh = try await providerToken {
                try await submission.refreshedToken { [tokens, counters] in
                    let fresh = try await tokens.token(for: submission.credential, replacing: rejection)
                    if fresh != submission.token { counters.providerTokenRefreshes.add(1, ordering: .relaxed) }
                    return fresh
                }
            }
        } catch {
            return submission.completion(index, .failure(error))
        }
        guard fresh != submission.token else { return submission.completion(index, .success(response)) }
        // A submission of its own with only this notification, so the retry does not
        // keep the rest of the batch alive.
        let completion = submission.completion
        submit(
            [0],
            of: APNsSubmission(
                client: self, credential: submission.credential, key: submission.key, token: fresh,
                notifications: APNsNotificationBatch(CollectionOfOne(submission.notifications[index])),
                isRefreshed: true,
                completion: { _, result in completion(index, result) }))
    }
}

/// Requests handed from `send` to the loop: one lock and one append per `send`,
/// one loop wake-up per batch. `accepting` turns false at shutdown.
struct APNsClientInbox {
    var accepting = true
    var requests: [APNsPendingRequest] = []
}

/// The client's loop-confined part: its pools, the periodic tick, shutdown.
final class APNsClientState {
    private let context: TLSContext
    private let configuration: APNsClient.Configuration
    private let loop: EventLoop
    private let logger: Logger
    private let counters: APNsClientCounters
    private var pools: [APNsPoolKey: APNsConnectionPool] = [:]
    private var tickTimer: EventLoop.TimerID?
    private var shutdown: (deadline: ContinuousClock.Instant, done: () -> Void)?

    init(
        context: TLSContext, configuration: APNsClient.Configuration, loop: EventLoop, logger: Logger,
        counters: APNsClientCounters
    ) {
        self.context = context
        self.configuration = configuration
        self.loop = loop
        self.logger = logger
        self.counters = counters
    }

    /// Spare storage swapped with the inbox's, so neither allocates per batch.
    private var batch: [APNsPendingRequest] = []

    /// Submits every request waiting in `inbox` to its pool.
    func takeRequests(from inbox: borrowing Mutex<APNsClientInbox>) {
        inbox.withLock { swap(&$0.requests, &batch) }
        var last: (submission: APNsSubmission, pool: APNsConnectionPool)?
        for request in batch {
            // A submission's requests arrive together and share a pool: look it up once.
            if let last, last.submission === request.submission {
                last.pool.submit(request)
                continue
            }
            let pool = pool(for: request.poolKey)
            last = (request.submission, pool)
            pool.submit(request)
        }
        batch.removeAll(keepingCapacity: true)
    }

    func pool(for key: APNsPoolKey) -> APNsConnectionPool {
        if let pool = pools[key] { return pool }
        let pool = APNsConnectionPool(
            key: key, context: context, configuration: configuration, loop: loop, logger: logger, counters: counters)
        if shutdown != nil { pool.beginShutdown() }
        pools[key] = pool
        scheduleTick()
        return pool
    }

    func shutDown(deadline: ContinuousClock.Instant, done: @escaping () -> Void) {
        shutdown = (deadline, done)
        for pool in pools.values { pool.beginShutdown() }
        checkShutdown()
    }

    /// The client is gone: fails what is queued, closes every connection now and
    /// drops the pools.
    func abandon() {
        for pool in pools.values { pool.finishShutdown() }
        pools.removeAll()
        if let tickTimer { loop.cancel(tickTimer) }
        tickTimer = nil
    }

    private func scheduleTick() {
        guard tickTimer == nil else { return }
        tickTimer = loop.schedule(after: configuration.tickInterval) { [weak self] in
            guard let self else { return }
            tickTimer = nil
            let now = ContinuousClock.now
            for pool in pools.values { pool.tick(now: now) }
            scheduleTick()
            checkShutdown()
        }
    }

    private func checkShutdown() {
        guard let shutdown else { return }
        guard ContinuousClock.now >= shutdown.deadline || pools.values.allSatisfy(\.isIdle) else { return }
        for pool in pools.values { pool.finishShutdown() }
        if let tickTimer { loop.cancel(tickTimer) }
        tickTimer = nil
        self.shutdown = nil
        shutdown.done()
    }
}

/// Carries a loop-confined object into closures that run on its loop.
/// `@unchecked Sendable`: the value is only ever touched on that loop's thread.
struct LoopConfined<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
