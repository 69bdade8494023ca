/// A permission an App API key carries. Open: stored as text, so scopes added
/// later need no migration; `known` lists those the service grants today.
public struct AppAPIScope: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Bind/unbind subscriptions, list a user's devices, send (the App API's push routes).
    public static let pushSend = AppAPIScope(rawValue: "push:send")

    public static let known: [AppAPIScope] = [.pushSend]

    public var isKnown: Bool { Self.known.contains(self) }

    public var description: String { rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
