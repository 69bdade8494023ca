import Foundation
import Synchronization
import Testing

@testable import Shared

@Suite struct APNsProviderTokenPolicyTests {
    let policy = ProviderTokenPolicy()
    let credential: APNsCredential
    let start = Date(timeIntervalSince1970: 1_700_000_000)

    init() throws {
        credential = APNsCredential(
            id: "cred-1", teamID: "TEAM123456", keyID: "KEY1234567", privateKey: try .generate())
    }

    func token(issuedMinutesBefore minutes: Double, value: String = "t", keyID: String? = nil) -> ProviderToken {
        ProviderToken(
            value: value, issuedAt: start.addingTimeInterval(-minutes * 60), keyID: keyID ?? credential.keyID,
            teamID: credential.teamID)
    }

    @Test func noTokenYetIsSigned() {
        #expect(policy.decide(current: nil, for: credential, now: start) == .sign)
    }

    @Test func aFreshTokenIsReused() {
        for minutes in [0.0, 1, 20, 49.9] {
            let current = token(issuedMinutesBefore: minutes)
            #expect(policy.decide(current: current, for: credential, now: start) == .use(current))
        }
    }

    @Test func aTokenFiftyMinutesOldIsResigned() {
        #expect(policy.decide(current: token(issuedMinutesBefore: 50), for: credential, now: start) == .sign)
        #expect(policy.decide(current: token(issuedMinutesBefore: 70), for: credential, now: start) == .sign)
    }

    @Test func anExpiredTokenYoungerThanTwentyMinutesIsNotResigned() {
        for minutes in [0.0, 5, 19.9] {
            let current = token(issuedMinutesBefore: minutes, value: "rejected")
            #expect(
                policy.decide(current: current, for: credential, rejected: .expired("rejected"), now: start)
                    == .use(current))
        }
    }

    @Test func anExpiredTokenTwentyMinutesOrOlderIsResigned() {
        for minutes in [20.0, 35] {
            let current = token(issuedMinutesBefore: minutes, value: "rejected")
            #expect(
                policy.decide(current: current, for: credential, rejected: .expired("rejected"), now: start) == .sign)
        }
    }

    /// Apple never verified an invalid token, so replacing it is no update under the 20-minute rule.
    @Test func anInvalidTokenIsResignedWhateverItsAge() {
        for minutes in [0.0, 5, 35] {
            let current = token(issuedMinutesBefore: minutes, value: "rejected")
            #expect(
                policy.decide(current: current, for: credential, rejected: .invalid("rejected"), now: start) == .sign)
        }
        let replaced = token(issuedMinutesBefore: 0, value: "newer")
        #expect(
            policy.decide(current: replaced, for: credential, rejected: .invalid("older"), now: start) == .use(replaced)
        )
    }

    @Test func aRejectionOfAnAlreadyReplacedTokenUsesTheReplacement() {
        let current = token(issuedMinutesBefore: 30, value: "newer")
        #expect(
            policy.decide(current: current, for: credential, rejected: .expired("older"), now: start) == .use(current))
    }

    @Test func aTokenOfAnotherKeyIsResignedAtOnce() {
        let current = token(issuedMinutesBefore: 1, keyID: "OTHERKEY00")
        #expect(policy.decide(current: current, for: credential, now: start) == .sign)
    }

    @Test func theLocalCopyIsUsedForAMinuteAndNotPastTheRefreshAge() {
        let current = token(issuedMinutesBefore: 10)
        #expect(policy.canUseLocalCopy(current, fetchedAt: start, for: credential, now: start.addingTimeInterval(59)))
        #expect(!policy.canUseLocalCopy(current, fetchedAt: start, for: credential, now: start.addingTimeInterval(60)))
        let old = token(issuedMinutesBefore: 49.5)
        #expect(!policy.canUseLocalCopy(old, fetchedAt: start, for: credential, now: start.addingTimeInterval(30)))
        // A clock that went backwards does not extend the copy's life.
        #expect(!policy.canUseLocalCopy(current, fetchedAt: start, for: credential, now: start.addingTimeInterval(-1)))
    }
}

@Suite struct APNsInMemoryProviderTokenStoreTests {
    final class Clock: Sendable {
        let seconds = Mutex<TimeInterval>(1_700_000_000)
        func advance(minutes: Double) { seconds.withLock { $0 += minutes * 60 } }
        var now: Date { Date(timeIntervalSince1970: seconds.withLock { $0 }) }
    }

    @Test func oneTokenIsSharedUntilFiftyMinutesThenResigned() async throws {
        let clock = Clock()
        let store = InMemoryProviderTokenStore(now: { clock.now })
        let key = try P256PrivateKey.generate()
        let credential = APNsCredential(id: "c", teamID: "TEAM123456", keyID: "KEY1234567", privateKey: key)
        let first = try await store.token(for: credential)
        clock.advance(minutes: 49)
        #expect(try await store.token(for: credential) == first)
        #expect(store.signedCount == 1)
        clock.advance(minutes: 1)
        let second = try await store.token(for: credential)
        #expect(second != first)
        #expect(store.signedCount == 2)
        let jwt = try ES256JWT.verify(second, key: key.publicKey)
        #expect(jwt.header.keyID == "KEY1234567")
        #expect(jwt.claims.issuer == "TEAM123456")
        #expect(jwt.claims.issuedAt == Int64(1_700_003_000))
    }

    @Test func expiredProviderTokenRefreshesOnceAndNeverWithinTwentyMinutes() async throws {
        let clock = Clock()
        let store = InMemoryProviderTokenStore(now: { clock.now })
        let credential = APNsCredential(id: "c", teamID: "TEAM123456", keyID: "KEY1234567", privateKey: try .generate())
        let first = try await store.token(for: credential)
        clock.advance(minutes: 5)
        // Rejected at 5 minutes: re-signing now would be refused, so the same token comes back.
        #expect(try await store.token(for: credential, replacing: .expired(first)) == first)
        clock.advance(minutes: 20)
        // Rejected at 25 minutes: one new token, shared by every caller that saw the rejection.
        let second = try await store.token(for: credential, replacing: .expired(first))
        #expect(second != first)
        #expect(try await store.token(for: credential, replacing: .expired(first)) == second)
        #expect(try await store.token(for: credential) == second)
        #expect(store.signedCount == 2)
    }
}
