/// Why APNs refused a request: the HTTP status and the `reason` string of
/// Apple's JSON body (`{"reason":"…"}`, plus `timestamp` for 410).
///
/// The reasons are Apple's ("Handling notification responses from APNs"), with
/// one exception: `BadPayload`, which Apple does not document (see `badPayload`).
struct APNsRejection: Error, Sendable, Equatable, CustomStringConvertible {
    let status: Int
    let reason: String
    /// For 410: when APNs last knew the token valid, in milliseconds since 1970.
    let timestamp: Int64?

    init(_ status: Int, _ reason: String, timestamp: Int64? = nil) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
    }

    var description: String { "\(status) \(reason)" }

    /// The response body, as APNs sends it.
    var body: [UInt8] {
        if let timestamp { return Array(#"{"reason":"\#(reason)","timestamp":\#(timestamp)}"#.utf8) }
        return Array(#"{"reason":"\#(reason)"}"#.utf8)
    }

    // 400
    static let badCollapseID = APNsRejection(400, "BadCollapseId")
    static let badDeviceToken = APNsRejection(400, "BadDeviceToken")
    static let badExpirationDate = APNsRejection(400, "BadExpirationDate")
    static let badMessageID = APNsRejection(400, "BadMessageId")
    static let badPriority = APNsRejection(400, "BadPriority")
    static let badTopic = APNsRejection(400, "BadTopic")
    static let deviceTokenNotForTopic = APNsRejection(400, "DeviceTokenNotForTopic")
    static let duplicateHeaders = APNsRejection(400, "DuplicateHeaders")
    static let invalidPushType = APNsRejection(400, "InvalidPushType")
    static let missingDeviceToken = APNsRejection(400, "MissingDeviceToken")
    static let missingTopic = APNsRejection(400, "MissingTopic")
    static let payloadEmpty = APNsRejection(400, "PayloadEmpty")
    static let topicDisallowed = APNsRejection(400, "TopicDisallowed")
    /// Not one of Apple's documented reasons: Apple lists none for a payload that
    /// is not a JSON object with an `aps` dictionary (its closest, PayloadEmpty,
    /// is kept for an empty body). Still a 400 that is neither BadDeviceToken nor
    /// anything retryable, which is what a client must make of it.
    static let badPayload = APNsRejection(400, "BadPayload")
    // 403
    static let expiredProviderToken = APNsRejection(403, "ExpiredProviderToken")
    static let unrelatedKeyIdInToken = APNsRejection(403, "UnrelatedKeyIdInToken")
    static let invalidProviderToken = APNsRejection(403, "InvalidProviderToken")
    static let missingProviderToken = APNsRejection(403, "MissingProviderToken")
    // 404, 405
    static let badPath = APNsRejection(404, "BadPath")
    static let methodNotAllowed = APNsRejection(405, "MethodNotAllowed")
    // 410
    static func unregistered(timestamp: Int64) -> APNsRejection {
        APNsRejection(410, "Unregistered", timestamp: timestamp)
    }
    // 413
    static let payloadTooLarge = APNsRejection(413, "PayloadTooLarge")
    // 429
    static let tooManyProviderTokenUpdates = APNsRejection(429, "TooManyProviderTokenUpdates")
    static let tooManyRequests = APNsRejection(429, "TooManyRequests")
    // 500, 503
    static let internalServerError = APNsRejection(500, "InternalServerError")
    static let serviceUnavailable = APNsRejection(503, "ServiceUnavailable")

    /// The injectable faults, by status.
    static func fault(status: Int) -> APNsRejection? {
        switch status {
        case 429: .tooManyRequests
        case 500: .internalServerError
        case 503: .serviceUnavailable
        default: nil
        }
    }
}
