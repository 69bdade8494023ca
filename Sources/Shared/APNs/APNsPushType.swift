/// `apns-push-type`. An open value type: unknown types pass through unchanged.
public struct APNsPushType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let alert = APNsPushType(rawValue: "alert")
    public static let background = APNsPushType(rawValue: "background")
    public static let location = APNsPushType(rawValue: "location")
    public static let voip = APNsPushType(rawValue: "voip")
    public static let complication = APNsPushType(rawValue: "complication")
    public static let fileProvider = APNsPushType(rawValue: "fileprovider")
    public static let mdm = APNsPushType(rawValue: "mdm")
    public static let liveActivity = APNsPushType(rawValue: "liveactivity")
    public static let pushToTalk = APNsPushType(rawValue: "pushtotalk")
    public static let widgets = APNsPushType(rawValue: "widgets")
    public static let controls = APNsPushType(rawValue: "controls")

    public var description: String { rawValue }
}
