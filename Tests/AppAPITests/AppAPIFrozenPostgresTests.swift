import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// A Postgres that neither answers nor refuses (frozen, or a network dropping
/// everything) holds a send no longer than `AppAPISender.readWait`: it answers 503
/// with nothing queued, so a backend that tries again does not send twice.
@Suite struct AppAPIFrozenPostgresTests {
    @Test func aSendWhosePostgresReadsDoNotAnswerFailsWithinTheWait() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        try await DeliveryStack.with { stack in
            let device = try await stack.device()
            let postgres = PostgresClient(url: databaseURL, applicationName: "pushgate-test-app-api")
            defer { postgres.close() }
            let sender = AppAPISender(
                repository: AppAPIRepository(postgres: postgres), redis: stack.redis, keys: stack.keys,
                cache: HotPathCache(
                    redis: stack.redis, keys: stack.keys, subscriptions: SubscriptionRepository(postgres: postgres),
                    directory: AppDirectory(postgres: postgres), lifetimeMilliseconds: 60_000),
                replies: ReplyCollector(redis: stack.redis, stopping: StopFlag()), maximumTTLSeconds: 3600,
                deadline: .seconds(1), metrics: IngressMetrics())
            let message = #"{"subscriptionId":"\#(device.id)","payload":"\#(DeliveryStack.payload)"}"#
            let batch = try SendBatch(json: Array(#"{"messages":[\#(message)]}"#.utf8))
            // Warm: the relayed connection is open (no worker runs: the message stays queued).
            _ = try await sender.send(batch, app: stack.fixture.appID)
            let queued = try await stack.redis.send("XLEN", stack.keys.stream).int

            relay.freeze()
            defer { relay.thaw() }
            // Bounded here too, so that a regression fails the test instead of hanging it.
            let attempt = Task { try await sender.send(batch, app: stack.fixture.appID) }
            do {
                _ = try await attempt.value(waitingAtMost: .seconds(15))
                Issue.record("the send should fail while Postgres does not answer")
            } catch let error as TimeLimitExceeded {
                #expect(error.limit == AppAPISender.readWait, "ended by the send's own wait, not the test's")
            }
            #expect(try await stack.redis.send("XLEN", stack.keys.stream).int == queued)
        }
    }
}
