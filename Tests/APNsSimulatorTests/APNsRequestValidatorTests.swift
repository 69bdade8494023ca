import Foundation
import Shared
import Testing

@testable import APNsSimulator

/// Every reason the validator gives, with Apple's exact status and reason string.
@Suite struct APNsRequestValidatorTests {
    let now = Int64(Date().timeIntervalSince1970)

    /// Judges one request on a fresh connection.
    func judge(
        _ headers: [HTTP2Header], body: [UInt8] = Fixtures.payload, rules: SimulatorRules = Fixtures.rules()
    ) -> APNsRequestValidator.Verdict {
        var tokens = ProviderTokenCache()
        return APNsRequestValidator.validate(headers: headers, body: body, rules: rules, tokens: &tokens, now: now)
    }

    func rejection(
        _ changes: [String: String?], body: [UInt8] = Fixtures.payload, rules: SimulatorRules = Fixtures.rules()
    )
        -> APNsRejection?
    {
        judge(Fixtures.headers(changes), body: body, rules: rules).rejection
    }

    @Test func aValidRequestIsAcceptedWithTheRequestsAPNsID() throws {
        let verdict = judge(Fixtures.headers())
        let accepted = try verdict.outcome.get()
        #expect(
            accepted
                == .init(
                    deviceToken: Fixtures.deviceToken[...], topic: Fixtures.bundleID, teamID: Fixtures.teamID,
                    keyID: Fixtures.keyID))
        #expect(verdict.apnsID == "123E4567-E89B-12D3-A456-426614174000")
        #expect(verdict.authenticated)
    }

    @Test func withoutAnAPNsIDAFreshUUIDIsReturned() throws {
        let verdict = judge(Fixtures.headers(["apns-id": nil]))
        #expect(verdict.rejection == nil)
        #expect(UUID(uuidString: verdict.apnsID) != nil)
    }

    @Test func optionalHeadersMayBeLeftOut() {
        let verdict = judge(
            Fixtures.headers([
                "apns-push-type": nil, "apns-priority": nil, "apns-expiration": nil, "apns-id": nil,
            ]))
        #expect(verdict.rejection == nil)
    }

    @Test func methodOtherThanPOSTIsMethodNotAllowed() {
        #expect(rejection([":method": "GET"]) == APNsRejection(405, "MethodNotAllowed"))
    }

    @Test func pathOutsideDeviceIsBadPath() {
        #expect(rejection([":path": "/3/devices/\(Fixtures.deviceToken)"]) == APNsRejection(404, "BadPath"))
        #expect(rejection([":path": "/2/device/\(Fixtures.deviceToken)"]) == APNsRejection(404, "BadPath"))
        #expect(rejection([":path": "/3/device/\(Fixtures.deviceToken)/x"]) == APNsRejection(404, "BadPath"))
        #expect(rejection([":path": "/3/device/"]) == APNsRejection(400, "MissingDeviceToken"))
    }

    @Test func repeatedAPNsHeadersAreDuplicateHeaders() {
        var headers = Fixtures.headers()
        headers.append(HTTP2Header("apns-topic", Fixtures.bundleID))
        #expect(judge(headers).rejection == APNsRejection(400, "DuplicateHeaders"))
    }

    @Test func missingAuthorizationIsMissingProviderToken() {
        #expect(rejection(["authorization": nil]) == APNsRejection(403, "MissingProviderToken"))
        #expect(rejection(["authorization": "bearer "]) == APNsRejection(403, "MissingProviderToken"))
    }

    @Test func unparsableOrWronglySignedTokensAreInvalidProviderToken() {
        let invalid = APNsRejection(403, "InvalidProviderToken")
        #expect(rejection(["authorization": "bearer not-a-jwt"]) == invalid)
        #expect(rejection(["authorization": "Basic dXNlcjpwdw=="]) == invalid)
        // Signed by another key than the one its kid names.
        let forged = Fixtures.token(key: Fixtures.otherKey)
        #expect(rejection(["authorization": "bearer \(forged)"]) == invalid)
        // A kid nobody configured.
        let unknown = Fixtures.token(keyID: "KEY9999999")
        #expect(rejection(["authorization": "bearer \(unknown)"]) == invalid)
        // iss is not the key's team.
        let wrongTeam = Fixtures.token(teamID: Fixtures.otherTeamID)
        #expect(rejection(["authorization": "bearer \(wrongTeam)"]) == invalid)
        // A signature byte flipped.
        var tampered = Array(Fixtures.token().utf8)
        tampered[tampered.count - 3] =
            tampered[tampered.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(rejection(["authorization": "bearer \(String(decoding: tampered, as: UTF8.self))"]) == invalid)
    }

    @Test func theBearerSchemeIsCaseInsensitive() {
        #expect(rejection(["authorization": "Bearer \(Fixtures.token())"]) == nil)
    }

    @Test func aRevokedKeyIsInvalidProviderToken() {
        var rules = Fixtures.rules()
        let revoked = rules.revokeKey(Fixtures.keyID)
        #expect(revoked)
        #expect(rejection([:], rules: rules) == APNsRejection(403, "InvalidProviderToken"))
    }

    @Test func aTokenOlderThanAnHourIsExpiredProviderToken() {
        let old = Fixtures.token(issuedAt: Date().addingTimeInterval(-3601))
        #expect(rejection(["authorization": "bearer \(old)"]) == APNsRejection(403, "ExpiredProviderToken"))
        let fresh = Fixtures.token(issuedAt: Date().addingTimeInterval(-3500))
        #expect(rejection(["authorization": "bearer \(fresh)"]) == nil)
    }

    /// Apple: `iat` no more than an hour from now, either way: one in milliseconds (a
    /// classic JWT bug) or from a clock running fast is refused.
    @Test func aTokenIssuedMoreThanAnHourAheadIsInvalidProviderToken() {
        let ahead = Fixtures.token(issuedAt: Date().addingTimeInterval(3601))
        #expect(rejection(["authorization": "bearer \(ahead)"]) == APNsRejection(403, "InvalidProviderToken"))
        let milliseconds = Fixtures.token(issuedAt: Date(timeIntervalSince1970: Date().timeIntervalSince1970 * 1000))
        #expect(rejection(["authorization": "bearer \(milliseconds)"]) == APNsRejection(403, "InvalidProviderToken"))
        let skewed = Fixtures.token(issuedAt: Date().addingTimeInterval(60))
        #expect(rejection(["authorization": "bearer \(skewed)"]) == nil)
    }

    /// Apple keeps a connection to the key of its first token: another key's (here
    /// another team's) is 403 UnrelatedKeyIdInToken, and the connection keeps its own.
    @Test func anotherKeysTokenOnAConnectionIsUnrelatedKeyIdInToken() {
        var tokens = ProviderTokenCache()
        let rules = Fixtures.rules()
        let other = Fixtures.token(keyID: Fixtures.otherKeyID, teamID: Fixtures.otherTeamID, key: Fixtures.otherKey)
        func send(_ token: String, topic: String) -> APNsRejection? {
            APNsRequestValidator.validate(
                headers: Fixtures.headers(token: token, ["apns-topic": topic]), body: Fixtures.payload, rules: rules,
                tokens: &tokens, now: now
            ).rejection
        }
        #expect(send(Fixtures.defaultToken, topic: Fixtures.bundleID) == nil)
        #expect(send(other, topic: Fixtures.otherBundleID) == APNsRejection(403, "UnrelatedKeyIdInToken"))
        #expect(send(Fixtures.defaultToken, topic: Fixtures.bundleID) == nil)
        // On a connection of its own it is fine.
        var fresh = ProviderTokenCache()
        let own = APNsRequestValidator.validate(
            headers: Fixtures.headers(token: other, ["apns-topic": Fixtures.otherBundleID]), body: Fixtures.payload,
            rules: rules, tokens: &fresh, now: now)
        #expect(own.rejection == nil)
    }

    @Test func topicMustBePresentWellFormedAndTheTeams() {
        #expect(rejection(["apns-topic": nil]) == APNsRejection(400, "MissingTopic"))
        #expect(rejection(["apns-topic": ""]) == APNsRejection(400, "BadTopic"))
        #expect(rejection(["apns-topic": "com.example app"]) == APNsRejection(400, "BadTopic"))
        #expect(rejection(["apns-topic": Fixtures.otherBundleID]) == APNsRejection(400, "TopicDisallowed"))
        #expect(rejection(["apns-topic": "com.unknown.app"]) == APNsRejection(400, "TopicDisallowed"))
    }

    @Test func aBundleIDMovedToAnotherTeamIsTopicDisallowed() {
        var rules = Fixtures.rules()
        rules.bundleOwners[Fixtures.bundleID] = Fixtures.otherTeamID
        #expect(rejection([:], rules: rules) == APNsRejection(400, "TopicDisallowed"))
    }

    @Test func pushTypeMustBeOneOfApplesAndMatchTheTopicSuffix() {
        #expect(rejection(["apns-push-type": "banner"]) == APNsRejection(400, "InvalidPushType"))
        #expect(rejection(["apns-push-type": "Alert"]) == APNsRejection(400, "InvalidPushType"))
        for type in ["alert", "background", "mdm"] { #expect(rejection(["apns-push-type": type]) == nil) }
        #expect(rejection(["apns-push-type": "voip", "apns-topic": "\(Fixtures.bundleID).voip"]) == nil)
        #expect(
            rejection(["apns-push-type": "liveactivity", "apns-topic": "\(Fixtures.bundleID).push-type.liveactivity"])
                == nil)
        #expect(rejection(["apns-push-type": "voip"]) == APNsRejection(400, "TopicDisallowed"))
        #expect(rejection(["apns-topic": "\(Fixtures.bundleID).voip"]) == APNsRejection(400, "TopicDisallowed"))
    }

    /// The byte checks decide prefixes and suffixes as Swift's String does, by characters.
    @Test func pathPrefixAndTopicSuffixAreMatchedByCharacters() {
        // A combining mark after "/3/device/" joins its "/": not that prefix.
        #expect(rejection([":path": "/3/device/\u{301}\(Fixtures.deviceToken)"]) == APNsRejection(404, "BadPath"))
        // U+0600 (a "prepend" character) joins the "." after it: the topic has no ".voip" suffix.
        var rules = Fixtures.rules()
        let topic = "\(Fixtures.bundleID)\u{600}.voip"
        rules.bundleOwners[topic] = Fixtures.teamID
        #expect(rejection(["apns-topic": topic], rules: rules) == nil)
        #expect(
            rejection(["apns-topic": topic, "apns-push-type": "voip"], rules: rules)
                == APNsRejection(400, "TopicDisallowed"))
    }

    @Test func priorityMustBe10Or5Or1() {
        for value in ["10", "5", "1"] { #expect(rejection(["apns-priority": value]) == nil) }
        for value in ["0", "3", "high", "", "10 "] {
            #expect(rejection(["apns-priority": value]) == APNsRejection(400, "BadPriority"))
        }
    }

    @Test func expirationMustBeAnInteger() {
        #expect(rejection(["apns-expiration": "1790000000"]) == nil)
        for value in ["-1", "soon", "", "1.5"] {
            #expect(rejection(["apns-expiration": value]) == APNsRejection(400, "BadExpirationDate"))
        }
    }

    @Test func collapseIDMustBeAtMost64Bytes() {
        #expect(rejection(["apns-collapse-id": String(repeating: "c", count: 64)]) == nil)
        #expect(
            rejection(["apns-collapse-id": String(repeating: "c", count: 65)]) == APNsRejection(400, "BadCollapseId"))
        // 22 three-byte characters: 66 bytes.
        #expect(
            rejection(["apns-collapse-id": String(repeating: "€", count: 22)]) == APNsRejection(400, "BadCollapseId"))
    }

    @Test func apnsIDMustBeACanonicalUUID() {
        #expect(rejection(["apns-id": "123e4567-e89b-12d3-a456-426614174000"]) == nil)
        for value in ["123E4567E89B12D3A456426614174000", "not-a-uuid", "123E4567-E89B-12D3-A456-42661417400G"] {
            let verdict = judge(Fixtures.headers(["apns-id": value]))
            #expect(verdict.rejection == APNsRejection(400, "BadMessageId"))
            #expect(verdict.apnsID != value)
        }
    }

    @Test func deviceTokenMustBeEvenLengthHex() {
        func bad(_ token: String) -> APNsRejection? { judge(Fixtures.headers(deviceToken: token)).rejection }
        #expect(bad(String(repeating: "A", count: 64)) == nil)
        #expect(bad(String(repeating: "a", count: 16)) == nil)
        #expect(bad(String(repeating: "a", count: 200)) == nil)
        for token in [
            String(repeating: "a", count: 63), String(repeating: "a", count: 14), String(repeating: "a", count: 202),
            String(repeating: "g", count: 64), "zz" + String(repeating: "a", count: 62),
        ] {
            #expect(bad(token) == APNsRejection(400, "BadDeviceToken"))
        }
    }

    @Test func payloadMustBeAJSONObjectWithAPS() {
        #expect(rejection([:], body: []) == APNsRejection(400, "PayloadEmpty"))
        #expect(rejection([:], body: Array("  \n".utf8)) == APNsRejection(400, "PayloadEmpty"))
        for text in ["hello", "[1,2]", #"{"aps":1}"#, #"{"alert":"x"}"#, #"{"aps":{}"#, #"{"aps":{}}x"#] {
            #expect(rejection([:], body: Array(text.utf8)) == APNsRejection(400, "BadPayload"), "\(text)")
        }
        #expect(rejection([:], body: Array(#"{"aps":{}}"#.utf8)) == nil)
    }

    @Test func payloadOver4096BytesIsPayloadTooLarge() {
        func payload(_ size: Int) -> [UInt8] {
            let head = #"{"aps":{},"c":""#
            return Array((head + String(repeating: "x", count: size - head.utf8.count - 2) + "\"}").utf8)
        }
        #expect(payload(4096).count == 4096)
        #expect(rejection([:], body: payload(4096)) == nil)
        #expect(rejection([:], body: payload(4097)) == APNsRejection(413, "PayloadTooLarge"))
        // VoIP notifications may carry 5 KB.
        let voip: [String: String?] = ["apns-push-type": "voip", "apns-topic": "\(Fixtures.bundleID).voip"]
        #expect(rejection(voip, body: payload(5120)) == nil)
        #expect(rejection(voip, body: payload(5121)) == APNsRejection(413, "PayloadTooLarge"))
    }

    /// A token of one environment pushed through the other's host: 400 BadDeviceToken
    /// (the port does not matter, nor the case of the host).
    @Test func aTokenOfAnotherEnvironmentIsBadDeviceToken() {
        var rules = Fixtures.rules()
        rules.deviceHosts[Fixtures.deviceToken] = "api.sandbox.push.apple.com"
        #expect(rejection([":authority": "api.push.apple.com"], rules: rules) == APNsRejection(400, "BadDeviceToken"))
        #expect(rejection([":authority": "API.sandbox.push.apple.com:443"], rules: rules) == nil)
        #expect(APNsRequestValidator.host(ofAuthority: "[::1]:2197") == "[::1]")
        #expect(APNsRequestValidator.host(ofAuthority: "[::1]") == "[::1]")
        #expect(APNsRequestValidator.host(ofAuthority: "LocalHost") == "localhost")
    }

    @Test func aTokenBoundToAnotherTopicIsDeviceTokenNotForTopic() {
        var rules = Fixtures.rules()
        rules.deviceTopics[Fixtures.deviceToken] = "com.example.elsewhere"
        #expect(rejection([:], rules: rules) == APNsRejection(400, "DeviceTokenNotForTopic"))
        rules.deviceTopics[Fixtures.deviceToken] = Fixtures.bundleID
        #expect(rejection([:], rules: rules) == nil)
    }

    @Test func anUninstalledTokenIsUnregisteredWithItsTimestamp() {
        var rules = Fixtures.rules()
        rules.uninstalled[Fixtures.deviceToken] = 1_700_000_000_123
        let rejection = rejection([:], rules: rules)
        #expect(rejection == APNsRejection(410, "Unregistered", timestamp: 1_700_000_000_123))
        #expect(
            rejection.map { String(decoding: $0.body, as: UTF8.self) }
                == #"{"reason":"Unregistered","timestamp":1700000000123}"#)
        // Matched in any case.
        #expect(
            judge(Fixtures.headers(deviceToken: Fixtures.deviceToken.uppercased()), rules: rules).rejection?.status
                == 410)
    }

    @Test func rejectionBodiesAreApplesJSON() {
        #expect(String(decoding: APNsRejection.badDeviceToken.body, as: UTF8.self) == #"{"reason":"BadDeviceToken"}"#)
    }

    // MARK: Provider tokens on one connection

    @Test func theSameTokenIsVerifiedOncePerConnection() {
        var tokens = ProviderTokenCache()
        let rules = Fixtures.rules()
        let token = Fixtures.token()
        for _ in 0..<50 {
            let verdict = APNsRequestValidator.validate(
                headers: Fixtures.headers(token: token), body: Fixtures.payload, rules: rules, tokens: &tokens, now: now
            )
            #expect(verdict.rejection == nil)
        }
        #expect(tokens.verifications == 1)
    }

    @Test func theCachedTokenMatchesOnlyTheWholeBearerValue() {
        let token = Fixtures.token()
        #expect(ProviderTokenCache.isBearer("bearer \(token)", carrying: token))
        #expect(ProviderTokenCache.isBearer("BeArEr \(token)", carrying: token))
        #expect(!ProviderTokenCache.isBearer("bearer \(token)x", carrying: token))
        #expect(!ProviderTokenCache.isBearer("bearer \(token.dropLast())", carrying: token))
        #expect(!ProviderTokenCache.isBearer("bearer  \(token)", carrying: token))
        #expect(!ProviderTokenCache.isBearer("bearerx\(token)", carrying: token))
        #expect(!ProviderTokenCache.isBearer("basic  \(token)", carrying: token))
        #expect(!ProviderTokenCache.isBearer("bearer ", carrying: ""))

        // A request repeating the token in another scheme case still uses the cache.
        var tokens = ProviderTokenCache()
        let rules = Fixtures.rules()
        for scheme in ["bearer", "Bearer", "BEARER"] {
            let headers = Fixtures.headers(["authorization": "\(scheme) \(token)"])
            let verdict = APNsRequestValidator.validate(
                headers: headers, body: Fixtures.payload, rules: rules, tokens: &tokens, now: now)
            #expect(verdict.rejection == nil)
        }
        #expect(tokens.verifications == 1)
    }

    @Test func aNewTokenWithinTheUpdatePeriodIsTooManyProviderTokenUpdates() {
        var tokens = ProviderTokenCache()
        let rules = Fixtures.rules()
        let first = Fixtures.token(issuedAt: Date(timeIntervalSince1970: TimeInterval(now - 10)))
        let second = Fixtures.token(issuedAt: Date(timeIntervalSince1970: TimeInterval(now)))
        func send(_ token: String, at time: Int64) -> APNsRejection? {
            APNsRequestValidator.validate(
                headers: Fixtures.headers(token: token), body: Fixtures.payload, rules: rules, tokens: &tokens,
                now: time
            ).rejection
        }
        #expect(send(first, at: now) == nil)
        #expect(send(second, at: now + 60) == APNsRejection(429, "TooManyProviderTokenUpdates"))
        // The connection keeps the first token, which still works.
        #expect(send(first, at: now + 61) == nil)
        // After the period the new token is taken.
        #expect(send(second, at: now + 20 * 60) == nil)
        #expect(tokens.current?.token == second)
    }

    /// The 50-minute refresh reaching a connection opened a minute earlier is not "too many updates".
    @Test func aTokenIssuedAFullPeriodAfterTheCurrentOneIsTakenEvenOnAYoungConnection() {
        var tokens = ProviderTokenCache()
        let rules = Fixtures.rules()
        let first = Fixtures.token(issuedAt: Date(timeIntervalSince1970: TimeInterval(now - 50 * 60)))
        let second = Fixtures.token(issuedAt: Date(timeIntervalSince1970: TimeInterval(now)))
        func send(_ token: String, at time: Int64) -> APNsRejection? {
            APNsRequestValidator.validate(
                headers: Fixtures.headers(token: token), body: Fixtures.payload, rules: rules, tokens: &tokens,
                now: time
            ).rejection
        }
        #expect(send(first, at: now - 60) == nil)
        #expect(send(second, at: now) == nil)
        #expect(tokens.current?.token == second)
    }

    @Test func revokingTheKeyOfACachedTokenTakesEffectOnTheNextRequest() {
        var tokens = ProviderTokenCache()
        var rules = Fixtures.rules()
        let token = Fixtures.token()
        func send() -> APNsRejection? {
            APNsRequestValidator.validate(
                headers: Fixtures.headers(token: token), body: Fixtures.payload, rules: rules, tokens: &tokens, now: now
            ).rejection
        }
        #expect(send() == nil)
        _ = rules.revokeKey(Fixtures.keyID)
        #expect(send() == APNsRejection(403, "InvalidProviderToken"))
    }

    @Test func aCachedTokenExpiresAnHourAfterItsIssue() {
        var tokens = ProviderTokenCache()
        let rules = Fixtures.rules()
        let token = Fixtures.token(issuedAt: Date(timeIntervalSince1970: TimeInterval(now)))
        func send(at time: Int64) -> APNsRejection? {
            APNsRequestValidator.validate(
                headers: Fixtures.headers(token: token), body: Fixtures.payload, rules: rules, tokens: &tokens,
                now: time
            ).rejection
        }
        #expect(send(at: now) == nil)
        #expect(send(at: now + 3600) == nil)
        #expect(send(at: now + 3601) == APNsRejection(403, "ExpiredProviderToken"))
    }
}

@Suite struct APNsIDGeneratorTests {
    @Test func idsAreDistinctCanonicalVersion4UUIDsInUpperCase() {
        var generator = APNsIDGenerator()
        var seen = Set<String>()
        for _ in 0..<1000 {
            let id = generator.next().description
            #expect(APNsRequestValidator.isCanonicalUUID(id))
            #expect(id == id.uppercased())
            #expect(UUID(uuidString: id) != nil)
            let utf8 = Array(id.utf8)
            #expect(utf8[14] == UInt8(ascii: "4"))
            #expect([UInt8(ascii: "8"), UInt8(ascii: "9"), UInt8(ascii: "A"), UInt8(ascii: "B")].contains(utf8[19]))
            seen.insert(id)
        }
        #expect(seen.count == 1000)
    }
}
