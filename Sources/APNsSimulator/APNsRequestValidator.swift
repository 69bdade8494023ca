import Foundation
import Shared

/// Judges one APNs request the way Apple does, without sockets: from its
/// headers, body, the rules in force and the connection's provider-token state
/// to 200 or Apple's status and reason.
///
/// Checks, in this order (the first failure answers):
/// 1. `:method` POST, else 405 MethodNotAllowed; `:path` `/3/device/<token>`,
///    else 404 BadPath (400 MissingDeviceToken when `<token>` is empty);
/// 2. `authorization`, `apns-*` headers given once, else 400 DuplicateHeaders;
/// 3. the provider token (`ProviderTokenCache`): 403 MissingProviderToken,
///    InvalidProviderToken (unparsable, bad signature, unknown or revoked `kid`,
///    `iss` not the key's team), ExpiredProviderToken (`iat` older than the
///    lifetime), 429 TooManyProviderTokenUpdates;
/// 4. `apns-topic`: missing → 400 MissingTopic; blank or with spaces → BadTopic;
///    `apns-push-type` one of Apple's nine (missing is allowed, as Apple allows
///    it off watchOS), else InvalidPushType;
/// 5. the topic's bundle id (without a push-type suffix such as `.voip`) not the
///    token's team's → TopicDisallowed; a push type that needs a topic
///    suffix (voip → `.voip`, liveactivity → `.push-type.liveactivity`…) used
///    with a topic without it, or the reverse → TopicDisallowed;
/// 6. `apns-priority` 10, 5 or 1 → else BadPriority; `apns-expiration` a
///    non-negative integer → else BadExpirationDate; `apns-collapse-id` 1…64
///    bytes → else BadCollapseId; `apns-id` a canonical UUID → else BadMessageId;
/// 7. the device token: even-length hex, 16…200 characters → else 400 BadDeviceToken;
/// 8. the payload: over 4096 bytes (5120 for voip) → 413 PayloadTooLarge; empty
///    → 400 PayloadEmpty; not a JSON object with an `aps` object → 400 BadPayload;
/// 9. the device token bound to another host (`:authority`: the other environment)
///    → 400 BadDeviceToken; bound to another topic → 400 DeviceTokenNotForTopic;
///    uninstalled → 410 Unregistered with its timestamp.
enum APNsRequestValidator {
    struct Accepted: Sendable, Equatable {
        /// As it appeared in `:path` (a slice of its value: no copy).
        let deviceToken: Substring
        let topic: String
        let teamID: String
        let keyID: String
    }

    struct Verdict: Sendable {
        /// For the `apns-id` response header: the request's if it is valid, else a new UUID.
        let responseID: APNsID
        let outcome: Result<Accepted, APNsRejection>
        /// The provider token passed (what lets APNs raise the stream limit).
        let authenticated: Bool

        var apnsID: String { responseID.description }

        var rejection: APNsRejection? {
            if case .failure(let rejection) = outcome { return rejection }
            return nil
        }
    }

    static let pushTypes: [StaticString] = [
        "alert", "background", "voip", "complication", "fileprovider", "mdm", "location", "liveactivity", "pushtotalk",
    ]

    /// The topic suffix each push type requires; the others take the bare bundle id.
    static let topicSuffixes: [(pushType: StaticString, suffix: StaticString)] = [
        ("liveactivity", ".push-type.liveactivity"), ("fileprovider", ".pushkit.fileprovider"),
        ("complication", ".complication"), ("location", ".location-query"), ("pushtotalk", ".voip-ptt"),
        ("voip", ".voip"),
    ]

    static let maximumPayloadBytes = 4096
    static let maximumVoIPPayloadBytes = 5120

    /// For tests: judges a header list.
    static func validate(
        headers: [HTTP2Header], body: [UInt8], rules: SimulatorRules, tokens: inout ProviderTokenCache, now: Int64,
        newID: () -> APNsID = { .requested(UUID().uuidString) }
    ) -> Verdict {
        validate(APNsRequestHeaders(headers), body: body, rules: rules, tokens: &tokens, now: now, newID: newID)
    }

    /// `now` is seconds since 1970 (token age and update period); `newID` makes the
    /// `apns-id` of a request that brings no valid one.
    static func validate(
        _ headers: APNsRequestHeaders, body: [UInt8], rules: SimulatorRules, tokens: inout ProviderTokenCache,
        now: Int64, newID: () -> APNsID
    ) -> Verdict {
        headers.withValues { fields in
            body.withUnsafeBufferPointer { body in
                validate(headers, fields, body: body, rules: rules, tokens: &tokens, now: now, newID: newID)
            }
        }
    }

    /// `fields` are `headers`' values as bytes.
    private static func validate(
        _ headers: APNsRequestHeaders, _ fields: APNsRequestHeaders.Values, body: UnsafeBufferPointer<UInt8>,
        rules: SimulatorRules, tokens: inout ProviderTokenCache, now: Int64, newID: () -> APNsID
    ) -> Verdict {
        let apnsID = headers[.apnsID].flatMap { isCanonicalUUID($0) ? APNsID.requested($0) : nil } ?? newID()

        func reject(_ rejection: APNsRejection, authenticated: Bool = false) -> Verdict {
            Verdict(responseID: apnsID, outcome: .failure(rejection), authenticated: authenticated)
        }

        // 1. Method and path.
        guard let method = fields[.method], UTF8Bytes.equal(method, "POST") else { return reject(.methodNotAllowed) }
        // The prefix as String.hasPrefix decides it, by characters: a combining mark after it would join its "/".
        guard let path = fields[.path], let pathText = headers[.path], UTF8Bytes.hasPrefix(path, "/3/device/"),
            path.count == 10 || path[10] < 0x80 || pathText.hasPrefix("/3/device/")
        else { return reject(.badPath) }
        let deviceToken = UnsafeBufferPointer(rebasing: path[10...])
        guard !deviceToken.isEmpty else { return reject(.missingDeviceToken) }
        guard !deviceToken.contains(UInt8(ascii: "/")) else { return reject(.badPath) }
        // 2. Repeated headers.
        guard !headers.hasRepeatedField else { return reject(.duplicateHeaders) }
        // 3. Provider token.
        let token: ProviderTokenCache.Verified
        switch tokens.authenticate(authorization: fields[.authorization], rules: rules, now: now) {
        case .failure(let rejection): return reject(rejection)
        case .success(let verified): token = verified
        }
        func refuse(_ rejection: APNsRejection) -> Verdict { reject(rejection, authenticated: true) }
        // 4, 5. Topic and push type.
        guard let topic = fields[.topic], let topicText = headers[.topic] else { return refuse(.missingTopic) }
        guard !topic.isEmpty, !topic.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { return refuse(.badTopic) }
        let pushType = fields[.pushType]
        if let pushType, !pushTypes.contains(where: { UTF8Bytes.equal(pushType, $0) }) {
            return refuse(.invalidPushType)
        }
        let suffixed = topicSuffixes.firstIndex { hasSuffix(topic, topicText, $0.suffix) }
        let bundleID =
            suffixed.map { String(decoding: topic.dropLast(topicSuffixes[$0].suffix.utf8CodeUnitCount), as: UTF8.self) }
            ?? topicText
        guard rules.bundleOwners[bundleID] == token.teamID else { return refuse(.topicDisallowed) }
        // The push type, when not given, is the one the topic's suffix names, else alert (no suffix).
        let required = pushType.map { pushType in topicSuffixes.firstIndex { UTF8Bytes.equal(pushType, $0.pushType) } }
        guard (required ?? suffixed) == suffixed else { return refuse(.topicDisallowed) }
        // 6. Delivery options.
        if let priority = fields[.priority], !["10", "5", "1"].contains(where: { UTF8Bytes.equal(priority, $0) }) {
            return refuse(.badPriority)
        }
        if let expiration = fields[.expiration], !isUnsignedInteger(expiration) { return refuse(.badExpirationDate) }
        if let collapseID = fields[.collapseID], collapseID.isEmpty || collapseID.count > 64 {
            return refuse(.badCollapseID)
        }
        if let id = fields[.apnsID], !isCanonicalUUID(id) { return refuse(.badMessageID) }
        // 7. Device token.
        guard (16...200).contains(deviceToken.count), deviceToken.count % 2 == 0, deviceToken.allSatisfy(isHexDigit)
        else {
            return refuse(.badDeviceToken)
        }
        // 8. Payload.
        // The topic check made the suffix agree with the push type, given or not.
        let isVoIP = suffixed.map { UTF8Bytes.equal(topicSuffixes[$0].pushType, "voip") } ?? false
        guard body.count <= (isVoIP ? maximumVoIPPayloadBytes : maximumPayloadBytes) else {
            return refuse(.payloadTooLarge)
        }
        guard !body.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) else {
            return refuse(.payloadEmpty)
        }
        guard JSONPayloadInspector.inspect(body) == .valid else { return refuse(.badPayload) }
        // 9. The device's own state.
        let deviceTokenText = Substring(pathText.utf8.dropFirst(10))
        if !rules.deviceTopics.isEmpty || !rules.uninstalled.isEmpty || !rules.deviceHosts.isEmpty {
            let key = deviceTokenText.lowercased()
            if let host = rules.deviceHosts[key], host != headers[.authority].map(Self.host(ofAuthority:)) {
                return refuse(.badDeviceToken)
            }
            if let bound = rules.deviceTopics[key], bound != topicText { return refuse(.deviceTokenNotForTopic) }
            if let timestamp = rules.uninstalled[key] { return refuse(.unregistered(timestamp: timestamp)) }
        }
        return Verdict(
            responseID: apnsID,
            outcome: .success(
                Accepted(deviceToken: deviceTokenText, topic: topicText, teamID: token.teamID, keyID: token.keyID)),
            authenticated: true)
    }

    /// `host[:port]` → `host`, lower-cased (`[::1]:443` → `[::1]`).
    static func host(ofAuthority authority: String) -> String {
        var host = Substring(authority)
        if let colon = host.lastIndex(of: ":"), !host[colon...].contains("]") { host = host[..<colon] }
        return host.lowercased()
    }

    /// 8-4-4-4-12 hex digits, either case.
    static func isCanonicalUUID(_ text: String) -> Bool {
        UTF8Bytes.with(text) { isCanonicalUUID($0) }
    }

    static func isCanonicalUUID(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count == 36 else { return false }
        for (offset, byte) in bytes.enumerated() {
            if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else if !isHexDigit(byte) {
                return false
            }
        }
        return true
    }

    /// Whether `bytes` (the UTF-8 of `text`) end with `suffix` as String.hasSuffix
    /// decides it, by characters: only a non-ASCII character before the suffix can
    /// join its first one.
    private static func hasSuffix(_ bytes: UnsafeBufferPointer<UInt8>, _ text: String, _ suffix: StaticString) -> Bool {
        guard UTF8Bytes.hasSuffix(bytes, suffix) else { return false }
        let before = bytes.count - suffix.utf8CodeUnitCount - 1
        return before < 0 || bytes[before] < 0x80 || text.hasSuffix(suffix.description)
    }

    static func isUnsignedInteger(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        !bytes.isEmpty && bytes.count <= 18 && bytes.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }
}
