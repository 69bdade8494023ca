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
///    its bundle id (the topic without a push-type suffix such as `.voip`) not
///    the token's team's → TopicDisallowed;
/// 5. `apns-push-type` one of Apple's nine (missing is allowed, as Apple allows
///    it off watchOS), else InvalidPushType; a push type that needs a topic
///    suffix (voip → `.voip`, liveactivity → `.push-type.liveactivity`…) used
///    with a topic without it, or the reverse → TopicDisallowed;
/// 6. `apns-priority` 10, 5 or 1 → else BadPriority; `apns-expiration` a
///    non-negative integer → else BadExpirationDate; `apns-collapse-id` 1…64
///    bytes → else BadCollapseId; `apns-id` a canonical UUID → else BadMessageId;
/// 7. the device token: even-length hex, 16…200 characters → else 400 BadDeviceToken;
/// 8. the payload: over 4096 bytes (5120 for voip) → 413 PayloadTooLarge; empty
///    → 400 PayloadEmpty; not a JSON object with an `aps` object → 400 BadPayload;
/// 9. the device token bound to another topic → 400 DeviceTokenNotForTopic;
///    uninstalled → 410 Unregistered with its timestamp.
enum APNsRequestValidator {
    struct Accepted: Sendable, Equatable {
        /// As it appeared in `:path`.
        let deviceToken: String
        let topic: String
        let teamID: String
        let keyID: String
    }

    struct Verdict: Sendable {
        /// For the `apns-id` response header: the request's if it is valid, else a new UUID.
        let apnsID: String
        let outcome: Result<Accepted, APNsRejection>
        /// The provider token passed (what lets APNs raise the stream limit).
        let authenticated: Bool

        var rejection: APNsRejection? {
            if case .failure(let rejection) = outcome { return rejection }
            return nil
        }
    }

    static let pushTypes: Set<String> = [
        "alert", "background", "voip", "complication", "fileprovider", "mdm", "location", "liveactivity", "pushtotalk",
    ]

    /// The topic suffix each push type requires; the others take the bare bundle id.
    static let topicSuffixes: [(pushType: String, suffix: String)] = [
        ("liveactivity", ".push-type.liveactivity"), ("fileprovider", ".pushkit.fileprovider"),
        ("complication", ".complication"), ("location", ".location-query"), ("pushtotalk", ".voip-ptt"),
        ("voip", ".voip"),
    ]

    static let maximumPayloadBytes = 4096
    static let maximumVoIPPayloadBytes = 5120

    /// `now` is seconds since 1970 (token age and update period); `newID` makes the
    /// `apns-id` of a request that brings no valid one.
    static func validate(
        headers: [HTTP2Header], body: [UInt8], rules: SimulatorRules, tokens: inout ProviderTokenCache, now: Int64,
        newID: () -> String = { UUID().uuidString }
    ) -> Verdict {
        var fields = Fields()
        var duplicate = false
        for header in headers { duplicate = fields.take(header) || duplicate }
        let apnsID = fields.apnsID.flatMap { isCanonicalUUID($0) ? $0 : nil } ?? newID()

        func reject(_ rejection: APNsRejection, authenticated: Bool = false) -> Verdict {
            Verdict(apnsID: apnsID, outcome: .failure(rejection), authenticated: authenticated)
        }

        // 1. Method and path.
        guard fields.method == "POST" else { return reject(.methodNotAllowed) }
        guard let path = fields.path, path.hasPrefix("/3/device/") else { return reject(.badPath) }
        // After the ASCII prefix: a scalar boundary, so nothing is lost or replaced.
        let deviceToken = UTF8Bytes.with(path) { String(decoding: UnsafeBufferPointer(rebasing: $0[10...]), as: UTF8.self) }
        guard !deviceToken.isEmpty else { return reject(.missingDeviceToken) }
        guard !UTF8Bytes.any(deviceToken, { $0 == UInt8(ascii: "/") }) else { return reject(.badPath) }
        // 2. Repeated headers.
        guard !duplicate else { return reject(.duplicateHeaders) }
        // 3. Provider token.
        let token: ProviderTokenCache.Verified
        switch tokens.authenticate(authorization: fields.authorization, rules: rules, now: now) {
        case .failure(let rejection): return reject(rejection)
        case .success(let verified): token = verified
        }
        func refuse(_ rejection: APNsRejection) -> Verdict { reject(rejection, authenticated: true) }
        // 4, 5. Topic and push type.
        guard let topic = fields.topic else { return refuse(.missingTopic) }
        // Byte checks: Character.isWhitespace and Foundation's `contains` cost more per request.
        guard !topic.isEmpty, !UTF8Bytes.any(topic, { $0 <= 0x20 || $0 == 0x7F }) else {
            return refuse(.badTopic)
        }
        if let pushType = fields.pushType, !pushTypes.contains(pushType) { return refuse(.invalidPushType) }
        let suffixed = topicSuffixes.first { topic.hasSuffix($0.suffix) }
        let bundleID = suffixed.map { String(topic.dropLast($0.suffix.count)) } ?? topic
        guard rules.bundleOwners[bundleID] == token.teamID else { return refuse(.topicDisallowed) }
        let pushType = fields.pushType ?? suffixed?.pushType ?? "alert"
        let requiredSuffix = topicSuffixes.first { $0.pushType == pushType }
        guard suffixed?.suffix == requiredSuffix?.suffix else { return refuse(.topicDisallowed) }
        // 6. Delivery options.
        switch fields.priority {
        case nil, "10", "5", "1": break
        default: return refuse(.badPriority)
        }
        if let expiration = fields.expiration, !isUnsignedInteger(expiration) { return refuse(.badExpirationDate) }
        if let collapseID = fields.collapseID, collapseID.utf8.isEmpty || collapseID.utf8.count > 64 {
            return refuse(.badCollapseID)
        }
        if let id = fields.apnsID, !isCanonicalUUID(id) { return refuse(.badMessageID) }
        // 7. Device token.
        let tokenLength = deviceToken.utf8.count
        guard (16...200).contains(tokenLength), tokenLength % 2 == 0, UTF8Bytes.all(deviceToken, isHexDigit) else {
            return refuse(.badDeviceToken)
        }
        // 8. Payload.
        let limit = pushType == "voip" ? maximumVoIPPayloadBytes : maximumPayloadBytes
        guard body.count <= limit else { return refuse(.payloadTooLarge) }
        guard !body.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) else {
            return refuse(.payloadEmpty)
        }
        guard JSONPayloadInspector.inspect(body) == .valid else { return refuse(.badPayload) }
        // 9. The device's own state.
        if !rules.deviceTopics.isEmpty || !rules.uninstalled.isEmpty {
            let key = deviceToken.lowercased()
            if let bound = rules.deviceTopics[key], bound != topic { return refuse(.deviceTokenNotForTopic) }
            if let timestamp = rules.uninstalled[key] { return refuse(.unregistered(timestamp: timestamp)) }
        }
        return Verdict(
            apnsID: apnsID,
            outcome: .success(
                Accepted(deviceToken: deviceToken, topic: topic, teamID: token.teamID, keyID: token.keyID)),
            authenticated: true)
    }

    /// 8-4-4-4-12 hex digits, either case.
    static func isCanonicalUUID(_ text: String) -> Bool {
        UTF8Bytes.with(text) { bytes in
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
    }

    static func isUnsignedInteger(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 18
            && UTF8Bytes.all(text) { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    static func isHexDigit(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }

    /// The headers APNs reads, from one pass over the list.
    private struct Fields {
        var method: String?
        var path: String?
        var authorization: String?
        var topic: String?
        var pushType: String?
        var priority: String?
        var expiration: String?
        var collapseID: String?
        var apnsID: String?

        /// Stores `header` if APNs reads it; true if it was already given.
        mutating func take(_ header: HTTP2Header) -> Bool {
            func store(_ slot: inout String?) -> Bool {
                defer { slot = header.value }
                return slot != nil
            }
            switch header.name {
            case ":method": return store(&method)
            case ":path": return store(&path)
            case "authorization": return store(&authorization)
            case "apns-topic": return store(&topic)
            case "apns-push-type": return store(&pushType)
            case "apns-priority": return store(&priority)
            case "apns-expiration": return store(&expiration)
            case "apns-collapse-id": return store(&collapseID)
            case "apns-id": return store(&apnsID)
            default: return false
            }
        }
    }
}
