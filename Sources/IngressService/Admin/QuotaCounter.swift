/// The ingress's live count of an account's pushes this month (what it compares with
/// the plan's limit before answering 1009).
protocol QuotaCounter: Sendable {
    /// Pushes counted for `accountID` in `month` (`yyyymm`, UTC); nil when nothing is counted.
    func used(accountID: String, month: String) async throws -> Int?
    /// Drops the counts of a deleted account (`months`: those whose counters may still
    /// live), so an account created later under its id starts at zero.
    func forget(accountID: String, months: [String]) async throws
}

/// No live counter: usage comes from the daily counts alone.
struct NoQuotaCounter: QuotaCounter {
    func used(accountID: String, month: String) async throws -> Int? { nil }
    func forget(accountID: String, months: [String]) async throws {}
}
