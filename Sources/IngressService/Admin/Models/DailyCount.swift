/// One row of an account's daily counts: what the workers recorded for one app on
/// one UTC day. Only these sums are kept, never individual sends.
struct DailyCount: Sendable, Codable, Equatable {
    /// `2026-12-07`
    var day: String
    var appId: String
    /// Handed to APNs.
    var sent: Int
    /// Failed at APNs or refused by a worker (`credential_missing`, `credential_rejected`,
    /// `provider_error`, expired).
    var failed: Int
    /// Device tokens APNs said were gone (their subscriptions deleted).
    var gone: Int
}

/// `GET /accounts/{id}/daily-counts`: the rows of `from`…`to` (UTC days, inclusive),
/// oldest first, then by app; days without a row are left out.
struct DailyCountList: Sendable, Codable, Equatable {
    var accountId: String
    var from: String
    var to: String
    var days: [DailyCount]
}
