import Shared

/// An account's push quota this UTC month: notifications handed to APNs so far and
/// the plan's limit (nil: unlimited).
struct AccountUsage: Sendable, Codable, Equatable {
    var accountId: String
    var plan: PlanName
    /// `2026-11`
    var month: String
    var used: Int
    var limit: Int?
    /// `limit - used`, never negative; nil when unlimited.
    var remaining: Int?
}

extension AccountUsage {
    /// Absent values are written as `null` (an explicit "none" for API clients), not left out.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(accountId, forKey: .accountId)
        try container.encode(plan, forKey: .plan)
        try container.encode(month, forKey: .month)
        try container.encode(used, forKey: .used)
        try container.encode(limit, forKey: .limit)
        try container.encode(remaining, forKey: .remaining)
    }
}
