/// `apns-priority`: how urgently APNs delivers. An open value type, so a value
/// Apple adds later can be sent without a new release.
public struct APNsPriority: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// 10: deliver at once (alerts, sounds, badges). APNs's default.
    public static let immediate = APNsPriority(rawValue: 10)
    /// 5: deliver with the device's power considerations in mind.
    public static let considerPower = APNsPriority(rawValue: 5)
    /// 1: prioritise the device's power over everything else.
    public static let low = APNsPriority(rawValue: 1)

    public var description: String { String(rawValue) }
}
