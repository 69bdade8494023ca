import Foundation

/// Why APNs refused a notification: the `reason` of an error response's JSON
/// body, covering every reason Apple documents, and `unknown` for anything else.
public enum APNsReason: Hashable, Sendable, CustomStringConvertible {
    // 400
    case badCollapseId
    case badDeviceToken
    case badExpirationDate
    case badMessageId
    case badPriority
    case badTopic
    case deviceTokenNotForTopic
    case duplicateHeaders
    case idleTimeout
    case invalidPushType
    case missingDeviceToken
    case missingTopic
    case payloadEmpty
    case topicDisallowed
    // 403
    case badCertificate
    case badCertificateEnvironment
    case expiredProviderToken
    case forbidden
    case invalidProviderToken
    case missingProviderToken
    case unrelatedKeyIdInToken
    case badEnvironmentKeyInToken
    // 404, 405
    case badPath
    case methodNotAllowed
    // 410: the token is no longer valid for the topic; `timestamp` is when APNs
    // last confirmed that (from the body's milliseconds since 1970).
    case expiredToken
    case unregistered(timestamp: Date?)
    // 413, 429
    case payloadTooLarge
    case tooManyProviderTokenUpdates
    case tooManyRequests
    // 500, 503
    case internalServerError
    case serviceUnavailable
    case shutdown
    /// A reason Apple added after this was written, kept as sent.
    case unknown(String)

    /// Every documented reason by its name in the body (`Unregistered` without a timestamp).
    static let documented: [String: APNsReason] = {
        let all: [APNsReason] = [
            .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
            .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
            .missingTopic, .payloadEmpty, .topicDisallowed, .badCertificate, .badCertificateEnvironment,
            .expiredProviderToken, .forbidden, .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken,
            .badEnvironmentKeyInToken, .badPath, .methodNotAllowed, .expiredToken, .unregistered(timestamp: nil),
            .payloadTooLarge, .tooManyProviderTokenUpdates, .tooManyRequests, .internalServerError,
            .serviceUnavailable, .shutdown,
        ]
        return Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })
    }()

    /// The reason named `name`; `timestamp` only matters for `Unregistered`.
    public init(name: String, timestamp: Date? = nil) {
        if name == "Unregistered" {
            self = .unregistered(timestamp: timestamp)
        } else {
            self = Self.documented[name] ?? .unknown(name)
        }
    }

    /// The reason in an APNs error body such as `{"reason":"Unregistered","timestamp":1700000000000}`;
    /// nil for an empty body or one without a string `reason`.
    public init?(body: [UInt8]) {
        guard !body.isEmpty,
            let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let name = object["reason"] as? String
        else { return nil }
        var timestamp: Date?
        if let milliseconds = (object["timestamp"] as? NSNumber)?.doubleValue {
            timestamp = Date(timeIntervalSince1970: milliseconds / 1000)
        }
        self.init(name: name, timestamp: timestamp)
    }

    /// The name as APNs writes it.
    public var name: String {
        switch self {
        case .badCollapseId: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageId: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIdInToken: "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyInToken: "BadEnvironmentKeyInToken"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .expiredToken: "ExpiredToken"
        case .unregistered: "Unregistered"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        case .unknown(let name): name
        }
    }

    public var description: String { name }
}
