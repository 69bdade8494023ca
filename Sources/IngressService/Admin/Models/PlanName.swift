import Shared

/// A plan as the admin API reads and writes it: one of the four the service sells.
/// (`Shared.Plan` is open, for rows written by a newer build; the API only accepts these.)
enum PlanName: String, Sendable, Codable, CaseIterable {
    case lite, plus, pro, enterprise

    var plan: Plan { Plan(rawValue: rawValue) }

    /// Notifications per UTC month: 0 without push (Lite), nil for unlimited.
    var monthlyLimit: Int? { plan.monthlyPushLimit }

    /// Lite has no push.
    var allowsPush: Bool { plan.offersPush }
}
