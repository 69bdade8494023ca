import Foundation
import Shared
import Synchronization

/// `RedisKeys.quotaMonth` for every push, worked out once a month: the text is kept
/// with the second its month ends, so a push costs a comparison instead of a
/// calendar conversion and two integers formatted.
final class QuotaMonthClock: Sendable {
    private struct Month {
        var name = ""
        /// Seconds since 1970 (UTC) of the month's first and the next month's first second.
        var start: Int64 = 0
        var end: Int64 = 0
    }

    private let month = Mutex(Month())

    /// The quota month (`yyyymm`, UTC) of `date`.
    func month(of date: Date) -> String { current(date).month.name }

    /// Whole seconds from `date` to the start of the next quota month (at least 1).
    func secondsToNextMonth(from date: Date) -> Int64 {
        let (month, seconds) = current(date)
        return max(month.end - seconds, 1)
    }

    /// The month of `date` (worked out again only when it changed), and `date` in seconds.
    private func current(_ date: Date) -> (month: Month, seconds: Int64) {
        let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
        let found = month.withLock { month in
            if seconds < month.start || seconds >= month.end { month = Self.month(containing: seconds) }
            return month
        }
        return (found, seconds)
    }

    private static func month(containing seconds: Int64) -> Month {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        parts.tm_mday = 1
        parts.tm_hour = 0
        parts.tm_min = 0
        parts.tm_sec = 0
        let start = Int64(timegm(&parts))
        parts.tm_mon += 1  // timegm normalises December + 1 into January
        let end = Int64(timegm(&parts))
        return Month(name: RedisKeys.quotaMonth(Date(timeIntervalSince1970: TimeInterval(seconds))), start: start, end: end)
    }
}
