import Foundation

/// `apns-expiration`: until when APNs keeps trying to deliver.
public enum APNsExpiration: Hashable, Sendable {
    /// 0: deliver once if the device is reachable now, never store.
    case immediately
    /// Store and retry until this moment (sent in whole seconds since 1970).
    case at(Date)

    /// The header value.
    public var headerValue: String { String(seconds) }

    /// The header's value as a number: whole seconds since 1970, 0 for `immediately`.
    var seconds: Int64 {
        switch self {
        case .immediately: 0
        case .at(let date): max(Int64(date.timeIntervalSince1970.rounded(.down)), 0)
        }
    }
}
