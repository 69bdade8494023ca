import Foundation

/// One notification request to APNs: where it goes and its headers and payload.
/// `description` never shows the device token or the payload.
public struct APNsNotification: Sendable, CustomStringConvertible {
    /// The device token, hex.
    public var deviceToken: String
    /// `apns-topic`: usually the app's bundle id.
    public var topic: String
    public var pushType: APNsPushType
    public var priority: APNsPriority
    /// nil leaves `apns-expiration` out (APNs then tries once).
    public var expiration: APNsExpiration?
    /// `apns-collapse-id`: notifications with the same id replace each other on the device.
    public var collapseID: String?
    /// `apns-id`: our id for the request, echoed back; APNs makes one when nil.
    public var apnsID: UUID?
    /// The JSON payload, at most 4 KB (5 KB for VoIP).
    public var payload: [UInt8]

    public init(
        deviceToken: String, topic: String, pushType: APNsPushType = .alert, priority: APNsPriority = .immediate,
        expiration: APNsExpiration? = nil, collapseID: String? = nil, apnsID: UUID? = nil, payload: [UInt8]
    ) {
        self.deviceToken = deviceToken
        self.topic = topic
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.payload = payload
    }

    public var description: String {
        "APNsNotification(topic: \(topic), type: \(pushType), priority: \(priority), apns-id: \(apnsID?.uuidString ?? "-"), "
            + "token: \(Redact.token(deviceToken)), payload: \(payload.count) bytes)"
    }
}
