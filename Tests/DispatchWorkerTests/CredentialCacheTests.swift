import Foundation
import Shared
import Synchronization
import TestSupport
import Testing

@testable import DispatchWorker

/// The worker's credential cache against the real Postgres, on a clock the test moves.
@Suite struct CredentialCacheTests {
    /// A cached rejection is read again only for a message accepted after it was
    /// decided, and at most once a second: earlier messages fail fast without asking
    /// Postgres; later ones within the second wait (`rechecking`) without asking it,
    /// rather than fail for good on an answer older than they are.
    @Test func aCachedRejectionIsReadAgainOnlyForLaterMessagesAndAtMostOnceASecond() async throws {
        try await DeliveryStack.with { stack in
            let now = Mutex<Int64>(1_000_000)
            let sealer = try PushCredentialSealer(key: Array(Data(base64Encoded: stack.credentialKey)!))
            let cache = CredentialCache(
                reader: PushCredentialReader(postgres: stack.postgres, sealer: sealer),
                logger: Logger(component: "test", minimumLevel: .error), clock: { now.withLock { $0 } })
            func rejected(acceptedAt: Int64) async -> Bool {
                if case .rejected = await cache.lookup(stack.credentialID, acceptedAt: acceptedAt) { return true }
                return false
            }
            try await stack.postgres.execute(
                "UPDATE push_credentials SET status = 'rejected', rejected_at = now() WHERE id = \(stack.credentialID)")
            #expect(await rejected(acceptedAt: 999_000))  // read at 1,000,000
            try await stack.postgres.execute(
                """
                UPDATE push_credentials SET status = 'active', rejected_at = NULL, rejected_reason = NULL
                WHERE id = \(stack.credentialID)
                """)
            #expect(await rejected(acceptedAt: 999_500))  // accepted before the answer: no read
            now.withLock { $0 = 1_000_999 }
            // Later, but within the second: no read, and not failed.
            let withinTheSecond = await cache.lookup(stack.credentialID, acceptedAt: 1_000_500)
            #expect({ if case .rechecking = withinTheSecond { true } else { false } }())
            now.withLock { $0 = 1_001_000 }
            #expect(!(await rejected(acceptedAt: 1_000_500)))  // a second on: read again, restored
        }
    }

    /// A sealed key that does not open leaves its messages waiting while no credential
    /// has opened with this key (a wrong `CREDENTIAL_KEY`); once one has, the key is
    /// right and that row is damaged: its messages fail (`damaged`) instead of waiting.
    @Test func anUnopenableKeyWaitsUntilAnotherOpensThenCountsAsMissing() async throws {
        try await DeliveryStack.with { stack in
            // The sealed key copied onto another row does not open there (the id is sealed in).
            let damaged = stack.credentialID + "-copy"
            try await stack.postgres.execute(
                """
                INSERT INTO push_credentials (id, account_id, team_id, key_id, sealed_key)
                SELECT \(damaged), account_id, team_id, key_id || 'X', sealed_key FROM push_credentials
                WHERE id = \(stack.credentialID)
                """)
            let sealer = try PushCredentialSealer(key: Array(Data(base64Encoded: stack.credentialKey)!))
            let cache = CredentialCache(
                reader: PushCredentialReader(postgres: stack.postgres, sealer: sealer), failureLifetime: .zero,
                logger: Logger(component: "test", minimumLevel: .error))
            #expect({ if case .unopenable = $0 { true } else { false } }(await cache.lookup(damaged)))
            #expect({ if case .usable = $0 { true } else { false } }(await cache.lookup(stack.credentialID)))
            #expect({ if case .damaged = $0 { true } else { false } }(await cache.lookup(damaged)))
        }
    }
}
