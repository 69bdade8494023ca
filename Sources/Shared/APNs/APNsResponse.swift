import Foundation

/// APNs's answer to one notification request.
public struct APNsResponse: Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status: 200 on success.
    public let status: Int
    /// `apns-id`: the request's id (ours, or the one APNs made).
    public let apnsID: UUID?
    /// Why it failed; nil on success (or for an error without a readable body).
    public let reason: APNsReason?

    public init(status: Int, apnsID: UUID?, reason: APNsReason?) {
        self.status = status
        self.apnsID = apnsID
        self.reason = reason
    }

    /// A response from HTTP/2 headers and body; nil without a valid `:status`.
    init?(headers: [HTTP2Header], body: [UInt8]) {
        guard let statusText = headers[":status"], let status = Int(statusText) else { return nil }
        self.status = status
        self.apnsID = headers["apns-id"].flatMap(UUID.init(uuidString:))
        self.reason = status == 200 ? nil : APNsReason(body: body)
    }

    public var isSuccess: Bool { status == 200 }

    /// For `Unregistered`, when APNs last confirmed the token was no longer valid.
    public var unregisteredTimestamp: Date? {
        if case .unregistered(let timestamp) = reason { return timestamp }
        return nil
    }

    public var description: String {
        "APNsResponse(\(status)\(reason.map { " \($0)" } ?? ""), apns-id: \(apnsID?.uuidString ?? "-"))"
    }
}
