import Foundation
import TestSupport
import Testing

@testable import APNsSimulator
@testable import Shared

/// Provider tokens as the simulator (like Apple) judges them: wrong, unknown and
/// revoked keys, expiry and the one refresh it triggers, the update period, the
/// 50-minute cadence, and one token shared by two workers through Redis.
///
/// Token stores read a `TestClock` set in the past, so a token can be "55 minutes
/// old" now. The simulator measures its update period in real time, so tests that
/// let the client re-sign on one connection shorten `tokenUpdatePeriodSeconds`.
@Suite struct ClientProviderTokenTests {
    @Test func aWrongKeyAnUnknownKidAndAnotherTeamsIssuerAreInvalidProviderToken() async throws {
        try await Simulator.with { simulator, client in
            let wrong: [(String, APNsCredential)] = [
                ("signed with another key", Teams.credential(key: try .generate())),
                ("unknown kid", Teams.credential(keyID: "NOSUCHKEY1")),
                ("iss not the key's team", Teams.credential(teamID: Teams.teamB)),
            ]
            for (what, credential) in wrong {
                let id = UUID()
                let response = try await client.send(
                    Teams.notification(id: id), credential: credential, environment: simulator.environment)
                #expect(response == APNsResponse(status: 403, apnsID: id, reason: .invalidProviderToken), "\(what)")
            }
            // Each was tried again once with a token signed just now, refused too.
            let stats = try await simulator.stats()
            #expect(stats.rejected == ["InvalidProviderToken": 6])
            #expect(stats.accepted == 0)
            #expect(client.metrics.providerTokenRefreshes == 3)
        }
    }

    @Test func aKeyRevokedThroughTheControlAPIFailsOnTheOpenConnectionAndANewKeyWorks() async throws {
        try await Simulator.with { simulator, client in
            let credential = Teams.credential()
            #expect(
                try await client.send(Teams.notification(), credential: credential, environment: simulator.environment)
                    .status == 200)
            #expect(try await simulator.control("POST", "/keys/\(Teams.keyA)/revoke").0 == 204)
            let id = UUID()
            let revoked = try await client.send(
                Teams.notification(id: id), credential: credential, environment: simulator.environment)
            #expect(revoked == APNsResponse(status: 403, apnsID: id, reason: .invalidProviderToken))
            // The same connection: the simulator re-checked the token it had cached.
            #expect(try await simulator.stats().connectionsOpened == 1)
            // The answer is final only after one refresh: a token signed just now was refused too.
            #expect(client.metrics.providerTokenRefreshes == 1)
            #expect(try await simulator.stats().rejected == ["InvalidProviderToken": 2])

            // The team's new key, added through the control API, is accepted (a new credential).
            let newKey = try P256PrivateKey.generate()
            let body =
                #"{"teamId":"\#(Teams.teamA)","publicKey":\#(JSONString.quote(try newKey.publicKey.pemRepresentation))}"#
            #expect(try await simulator.control("PUT", "/keys/KEYNEW0001", body).0 == 204)
            let rotated = Teams.credential(keyID: "KEYNEW0001", key: newKey)
            #expect(
                try await client.send(Teams.notification(), credential: rotated, environment: simulator.environment)
                    .status == 200)
        }
    }

    /// The shared store holds a token Apple cannot verify: signed with an earlier key
    /// under the same credential id and key id (a .p8 replaced in place). One refresh
    /// signs with the right key, and the notification is delivered.
    @Test func anInvalidTokenIsReplacedAtOnceAndTheNotificationDelivered() async throws {
        let tokens = InMemoryProviderTokenStore()
        let credential = Teams.credential()
        let replaced = APNsCredential(
            id: credential.id, teamID: credential.teamID, keyID: credential.keyID, privateKey: try .generate())
        let stale = try await tokens.token(for: replaced)
        try await Simulator.with(tokens: tokens) { simulator, client in
            let id = UUID()
            let response = try await client.send(
                Teams.notification(id: id), credential: credential, environment: simulator.environment)
            #expect(response == APNsResponse(status: 200, apnsID: id, reason: nil))
            #expect(client.metrics.providerTokenRefreshes == 1)
            #expect(try await tokens.token(for: credential) != stale)
            let stats = try await simulator.stats()
            #expect(stats.rejected == ["InvalidProviderToken": 1])
            #expect(stats.accepted == 1)
        }
    }

    @Test func anExpiredTokenIsRefreshedOnceAndTheNotificationRetried() async throws {
        // Tokens older than 10 minutes are expired here; ours is 25 minutes old.
        let clock = TestClock(offset: -25 * 60)
        let tokens = InMemoryProviderTokenStore(now: { clock.now })
        let credential = Teams.credential()
        let old = try await tokens.token(for: credential)
        clock.set(offset: 0)
        try await Simulator.with({ $0.tokenLifetimeSeconds = 10 * 60 }, tokens: tokens) { simulator, client in
            let id = UUID()
            let response = try await client.send(
                Teams.notification(id: id), credential: credential, environment: simulator.environment)
            #expect(response == APNsResponse(status: 200, apnsID: id, reason: nil))
            #expect(client.metrics.providerTokenRefreshes == 1)
            #expect(tokens.signedCount == 2)
            #expect(try await tokens.token(for: credential) != old)
            let stats = try await simulator.stats()
            #expect(stats.rejected == ["ExpiredProviderToken": 1])
            #expect(stats.accepted == 1)
            #expect(stats.providerTokensSeen == 1)  // only the new one was accepted
            #expect(stats.connectionsOpened == 1)
            // Recorded once: the rejected attempt is not a delivery.
            #expect(simulator.state.recordings().map(\.apnsID).compactMap(UUID.init(uuidString:)) == [id])
        }
    }

    /// Apple says expired, but the token is younger than 20 minutes: re-signing
    /// would break the update rule, so the answer goes back to the caller as it is.
    @Test func anExpiredAnswerForATokenYoungerThan20MinutesIsNotRefreshed() async throws {
        let clock = TestClock(offset: -5)
        let tokens = InMemoryProviderTokenStore(now: { clock.now })
        let credential = Teams.credential()
        _ = try await tokens.token(for: credential)
        clock.set(offset: 0)
        try await Simulator.with({ $0.tokenLifetimeSeconds = 1 }, tokens: tokens) { simulator, client in
            let id = UUID()
            let response = try await client.send(
                Teams.notification(id: id), credential: credential, environment: simulator.environment)
            #expect(response == APNsResponse(status: 403, apnsID: id, reason: .expiredProviderToken))
            #expect(client.metrics.providerTokenRefreshes == 0)
            #expect(tokens.signedCount == 1)
            #expect(try await simulator.stats().rejected == ["ExpiredProviderToken": 1])
        }
    }

    /// A token re-signed too soon (a policy allowing it after 1 s; the store's
    /// clock stands still but for that one second, so the two `iat`s differ by
    /// exactly 1 s, under a 3-second period) on a connection that installed the
    /// previous one just now. That connection would refuse the new token until the
    /// period is over, so the client replaces it: a new connection takes it at once.
    @Test func aSecondTokenOnOneConnectionWithinTheUpdatePeriodIsTooManyProviderTokenUpdates() async throws {
        let clock = TestClock(frozenAt: Date())
        let tokens = InMemoryProviderTokenStore(
            policy: ProviderTokenPolicy(refreshAge: 1, minimumAge: 0, localCacheLifetime: 0), now: { clock.now })
        let credential = Teams.credential()
        try await Simulator.with({ $0.tokenUpdatePeriodSeconds = 3 }, tokens: tokens) { simulator, client in
            #expect(
                try await client.send(Teams.notification(), credential: credential, environment: simulator.environment)
                    .status == 200)
            clock.advance(seconds: 1)  // the store re-signs; on the same connection, at once
            let id = UUID()
            let refused = try await client.send(
                Teams.notification(id: id), credential: credential, environment: simulator.environment)
            #expect(refused == APNsResponse(status: 429, apnsID: id, reason: .tooManyProviderTokenUpdates))
            #expect(tokens.signedCount == 2)
            // Within the (shortened) period, on a new connection.
            #expect(
                try await client.send(Teams.notification(), credential: credential, environment: simulator.environment)
                    .status == 200)
            let stats = try await simulator.stats()
            #expect(stats.rejected == ["TooManyProviderTokenUpdates": 1])
            #expect(stats.providerTokensSeen == 2)
            #expect(stats.connectionsOpened == 2)
        }
    }

    /// Regression: a connection opened shortly before the shared token's 50-minute
    /// refresh must take the new token (signed 50 minutes after the old one), as
    /// Apple limits how often tokens are made, not how long a connection held one.
    /// The simulator used to answer 429 until the connection was 20 minutes old.
    @Test func aConnectionOpenedJustBeforeTheFiftyMinuteRefreshTakesTheNewToken() async throws {
        // The shared token was signed 49.5 minutes ago; the connection opens now.
        let clock = TestClock(offset: -(49 * 60 + 30))
        let tokens = InMemoryProviderTokenStore(now: { clock.now })
        let credential = Teams.credential()
        _ = try await tokens.token(for: credential)
        clock.set(offset: 0)
        try await Simulator.with(tokens: tokens) { simulator, client in  // the default 20-minute period
            #expect(
                try await client.send(Teams.notification(), credential: credential, environment: simulator.environment)
                    .status == 200)
            clock.advance(seconds: 60)  // 50.5 minutes old: re-signed
            let response = try await client.send(
                Teams.notification(), credential: credential, environment: simulator.environment)
            #expect(response.status == 200, "\(response)")
            #expect(tokens.signedCount == 2)
            let stats = try await simulator.stats()
            #expect(stats.providerTokensSeen == 2)
            #expect(stats.connectionsOpened == 1)
        }
    }

    /// One token for 50 minutes (by the token store's clock), then exactly one new one.
    @Test func theTokenIsReusedFor50MinutesThenResignedOnce() async throws {
        let clock = TestClock(offset: -55 * 60)
        let tokens = InMemoryProviderTokenStore(now: { clock.now })
        let credential = Teams.credential()
        try await Simulator.with(
            { $0.tokenUpdatePeriodSeconds = 0 }, tokens: tokens, client: { $0.connectionsPerPool = 2 }
        ) {
            simulator, client in
            func burst() async -> [String: Int] {
                let notifications = (0..<50).map { _ in Teams.notification() }
                return failureSummary(
                    await client.sendAll(notifications, credential: credential, environment: simulator.environment))
            }
            #expect(await burst() == [:])
            clock.advance(seconds: 49 * 60)  // 49 minutes old: kept
            #expect(await burst() == [:])
            #expect(tokens.signedCount == 1)
            #expect(try await simulator.stats().providerTokensSeen == 1)
            clock.advance(seconds: 6 * 60)  // 55 minutes old: re-signed, once
            #expect(await burst() == [:])
            #expect(await burst() == [:])
            #expect(tokens.signedCount == 2)
            let stats = try await simulator.stats()
            #expect(stats.providerTokensSeen == 2)
            #expect(stats.accepted == 200)
            #expect(stats.rejected.isEmpty)
        }
    }

    /// Two workers (two clients, each with its own Redis-backed store) use one
    /// token, signed once; when it ages out, one of them re-signs and both switch.
    @Test func twoWorkersShareOneTokenThroughRedis() async throws {
        let redis = try RedisClient(url: TestEnvironment.redisURL)
        let clock = TestClock(offset: -55 * 60)
        let credential = Teams.credential()
        let storeA = RedisProviderTokenStore(redis: redis, now: { clock.now })
        let storeB = RedisProviderTokenStore(redis: redis, now: { clock.now })
        defer { redis.close() }
        let simulator = try await Simulator.start { $0.tokenUpdatePeriodSeconds = 0 }
        let workerA = try simulator.client(tokens: storeA)
        let workerB = try simulator.client(tokens: storeB)
        func burst() async -> [String: Int] {
            await withTaskGroup(of: [String: Int].self) { group in
                for worker in [workerA, workerB] {
                    group.addTask {
                        failureSummary(
                            await worker.sendAll(
                                (0..<50).map { _ in Teams.notification() }, credential: credential,
                                environment: simulator.environment))
                    }
                }
                return await group.reduce(into: [:]) { $0.merge($1, uniquingKeysWith: +) }
            }
        }
        #expect(await burst() == [:])
        var stats = try await simulator.stats()
        #expect(stats.accepted == 100)
        #expect(stats.connectionsOpened == 2)
        #expect(stats.providerTokensSeen == 1)
        #expect(storeA.signedCount + storeB.signedCount == 1)

        clock.advance(seconds: 55 * 60)  // the shared token is 55 minutes old
        #expect(await burst() == [:])
        stats = try await simulator.stats()
        #expect(stats.accepted == 200)
        #expect(stats.providerTokensSeen == 2)
        #expect(storeA.signedCount + storeB.signedCount == 2)

        await workerA.shutdown(deadline: .seconds(1))
        await workerB.shutdown(deadline: .seconds(1))
        await simulator.stop()
        _ = try? await redis.send("DEL", RedisProviderTokenStore.tokenKey(credential))
    }
}
