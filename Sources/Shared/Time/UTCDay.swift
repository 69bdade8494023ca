import Foundation

/// A calendar day in UTC written `yyyy-MM-dd`: how the daily counts name their rows,
/// in the workers' writes and the admin API's reads alike.
public enum UTCDay {
    /// The day `date` falls on.
    public static func text(of date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let month = Int(parts.tm_mon) + 1
        let day = Int(parts.tm_mday)
        return "\(Int(parts.tm_year) + 1900)-\(month < 10 ? "0" : "")\(month)-\(day < 10 ? "0" : "")\(day)"
    }

    /// The UTC midnight that starts `text`, if it is a day written `yyyy-MM-dd`; nil
    /// otherwise, and for one that is no day (`2026-02-30` is refused, not rolled over).
    public static func start(of text: String) -> Date? {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else { return nil }
        func number(_ range: Range<Int>) -> Int32? {
            var value: Int32 = 0
            for byte in bytes[range] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int32(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10) else { return nil }
        var parts = tm()
        (parts.tm_year, parts.tm_mon, parts.tm_mday) = (year - 1900, month - 1, day)
        let date = Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
        // timegm normalizes (month 13, day 30 of February): only a day it kept is one.
        return Self.text(of: date) == text ? date : nil
    }
}
