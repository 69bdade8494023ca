import Shared

/// An account's push quota this UTC month: pushes counted against it and the plan's
/// limit (nil: unlimited). `used` is the ingress's live count (accepted pushes, minus
/// those that failed) when it keeps one, else `sent`; `sent` is what the workers
/// confirmed handed to APNs (the daily counts).
struct AccountUsage: Sendable, Codable, Equatable {
    var accountId: String
    var plan: PlanName
    /// `2026-11`
    var month: String
    var used: Int
    var sent: Int
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
        try container.encode(sent, forKey: .sent)
        try container.encode(limit, forKey: .limit)
        try container.encode(remaining, forKey: .remaining)
    }
}
