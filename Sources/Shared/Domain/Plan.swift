/// An account's plan: whether its apps may push, and how many notifications
/// handed to APNs it may send per UTC calendar month (shared by all its apps).
public enum Plan: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case lite, plus, pro, enterprise

    /// Notifications per UTC month: 0 for Lite (no push), nil for unlimited.
    public var monthlyQuota: Int? {
        switch self {
        case .lite: 0
        case .plus: 50_000
        case .pro: 500_000
        case .enterprise: nil
        }
    }

    /// Lite has no push; the others do.
    public var allowsPush: Bool { self != .lite }

    public var description: String { rawValue }
}
