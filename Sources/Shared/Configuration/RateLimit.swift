/// "At most `limit` requests in any `windowSeconds`-second window", written
/// `limit/seconds` in the environment (e.g. `120/60`).
public struct RateLimit: Sendable, Equatable, CustomStringConvertible {
    public let limit: Int
    public let windowSeconds: Int

    public init(limit: Int, windowSeconds: Int) {
        self.limit = limit
        self.windowSeconds = windowSeconds
    }

    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let limit = Int(parts[0]), let window = Int(parts[1]), limit >= 1,
            (1...86_400 * 31).contains(window)
        else { return nil }
        self.init(limit: limit, windowSeconds: window)
    }

    public var windowMilliseconds: Int64 { Int64(windowSeconds) * 1000 }
    public var description: String { "\(limit)/\(windowSeconds)" }
}
