/// An account's plan, as stored in `accounts.plan`; it sets the monthly push quota.
public struct Plan: RawRepresentable, Sendable, Hashable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let lite = Plan(rawValue: "lite")
    public static let plus = Plan(rawValue: "plus")
    public static let pro = Plan(rawValue: "pro")
    public static let enterprise = Plan(rawValue: "enterprise")

    /// Pushes per UTC month: nil for unlimited, 0 where push is not offered (Lite,
    /// and any plan this build does not know).
    /// Whether the plan offers push at all.
    public var offersPush: Bool { monthlyPushLimit != 0 }

    public var monthlyPushLimit: Int? {
        switch self {
        case .plus: 50_000
        case .pro: 500_000
        case .enterprise: nil
        default: 0
        }
    }
}
