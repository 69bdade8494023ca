import Foundation
import TestSupport
import Testing

@testable import APNsSimulator
@testable import Shared

/// The batch `send`: every notification is reported exactly once under its own
/// index, whether it was refused before the hand-over, answered, or answered
/// `ExpiredProviderToken` and retried with a new token; and a client that is
/// shutting down fails the whole batch with `shutdown`.
@Suite struct ClientBatchSendTests {
    @Test func eachNotificationIsReportedOnceUnderItsIndexAndAnInvalidOneIsNotSent() async throws {
        try await Simulator.with { simulator, client in
            let ids = (0..<5).map { _ in UUID() }
            var notifications = ids.map { Teams.notification(id: $0) }
            notifications[2] = Teams.notification(deviceToken: "not-hex", id: ids[2])
            let results = await client.sendBatch(
                notifications, credential: Teams.credential(), environment: simulator.environment)

            #expect(results.keys.sorted() == [0, 1, 2, 3, 4])
            #expect(results.values.allSatisfy { $0.count == 1 })
            for index in [0, 1, 3, 4] {
                #expect(
                    results[index]?.first.flatMap(answer) == APNsResponse(status: 200, apnsID: ids[index], reason: nil))
            }
            #expect(results[2]?.first.map(failureCode) == .invalidRequest)
            let stats = try await simulator.stats()
            #expect(stats.accepted == 4)
        }
    }

    @Test func anExpiredTokenIsRefreshedOnceAndEveryNotificationOfTheBatchRetried() async throws {
        // Tokens older than 10 minutes are expired here; ours is 25 minutes old.
        let clock = TestClock(offset: -25 * 60)
        let tokens = InMemoryProviderTokenStore(now: { clock.now })
        let credential = Teams.credential()
        _ = try await tokens.token(for: credential)
        clock.set(offset: 0)
        try await Simulator.with({ $0.tokenLifetimeSeconds = 10 * 60 }, tokens: tokens) { simulator, client in
            let ids = (0..<3).map { _ in UUID() }
            let results = await client.sendBatch(
                ids.map { Teams.notification(id: $0) }, credential: credential, environment: simulator.environment)

            for (index, id) in ids.enumerated() {
                #expect(results[index]?.count == 1)
                #expect(results[index]?.first.flatMap(answer) == APNsResponse(status: 200, apnsID: id, reason: nil))
            }
            #expect(tokens.signedCount == 2)
            #expect(client.metrics.providerTokenRefreshes == 1)
            let stats = try await simulator.stats()
            #expect(stats.accepted == 3)
            let recorded = simulator.state.recordings().map(\.apnsID).compactMap(UUID.init(uuidString:))
            #expect(Set(recorded) == Set(ids))
            #expect(recorded.count == 3)
        }
    }

    /// A shutdown whose drain ends before APNs answered closes connections that never
    /// answered: no connection failure (backoff, a warning that reads like an outage).
    @Test func aShutdownCuttingOffUnansweredSendsCountsNoConnectionFailure() async throws {
        try await Simulator.with { simulator, client in
            #expect(try await simulator.control("PUT", "/latency", #"{"milliseconds":3000}"#).0 == 204)
            let sending = Task {
                await client.sendBatch(
                    [Teams.notification()], credential: Teams.credential(), environment: simulator.environment)
            }
            let started = try await Poll.until(timeout: .seconds(5)) { client.metrics.connectionsOpened == 1 }
            #expect(started)
            try await Task.sleep(for: .milliseconds(300))
            await client.shutdown(deadline: .milliseconds(100))
            let results = await sending.value
            #expect(results[0]?.map(failureCode) == [.shutdown])
            #expect(client.metrics.connectionFailures == 0)
        }
    }

    @Test func aClientShuttingDownFailsTheWholeBatchWithShutdown() async throws {
        try await Simulator.with { simulator, client in
            await client.shutdown(deadline: .seconds(1))
            let results = await client.sendBatch(
                [Teams.notification(), Teams.notification()], credential: Teams.credential(),
                environment: simulator.environment)

            #expect(results.keys.sorted() == [0, 1])
            #expect(results.values.allSatisfy { $0.map(failureCode) == [.shutdown] })
        }
    }
}

private func answer(_ result: Result<APNsResponse, APNsClientError>) -> APNsResponse? {
    guard case .success(let response) = result else { return nil }
    return response
}

private func failureCode(_ result: Result<APNsResponse, APNsClientError>) -> APNsClientError.Code? {
    guard case .failure(let error) = result else { return nil }
    return error.code
}

extension APNsClient {
    /// Every result the batch `send` reported, by index: one per notification, and
    /// whatever else arrived in the 100 ms after the last (a report made twice).
    fileprivate func sendBatch(
        _ notifications: [APNsNotification], credential: APNsCredential, environment: APNsEnvironment
    ) async -> [Int: [Result<APNsResponse, APNsClientError>]] {
        let (stream, continuation) = AsyncStream.makeStream(of: (Int, Result<APNsResponse, APNsClientError>).self)
        await send(notifications, credential: credential, environment: environment) { index, result in
            continuation.yield((index, result))
        }
        var results: [Int: [Result<APNsResponse, APNsClientError>]] = [:]
        var iterator = stream.makeAsyncIterator()
        for _ in notifications.indices {
            guard let (index, result) = await iterator.next() else { break }
            results[index, default: []].append(result)
        }
        try? await Task.sleep(for: .milliseconds(100))
        continuation.finish()
        while let (index, result) = await iterator.next() { results[index, default: []].append(result) }
        return results
    }
}
