import Shared

/// An account's push quota this UTC month: notifications handed to APNs so far and
/// the plan's limit (nil: unlimited).
struct AccountUsage: Sendable, Codable, Equatable {
    var accountId: String
    var plan: Plan
    /// `2026-11`
    var month: String
    var used: Int
    var limit: Int?
    /// `limit - used`, never negative; nil when unlimited.
    var remaining: Int?
}
