import Foundation

/// Where requests go: APNs production or sandbox (development builds), or a
/// stand-in such as the local simulator. Pools are keyed by it, so two
/// environments never share a connection.
public struct APNsEnvironment: Hashable, Sendable, CustomStringConvertible {
    /// `production` or `sandbox`; for logs and metrics.
    public let name: String
    public let host: String
    public let port: Int
    /// `:authority`: the host, with the port unless it is 443.
    let authority: String

    public init(name: String, host: String, port: Int = 443) {
        self.name = name
        self.host = host
        self.port = port
        self.authority = port == 443 ? host : "\(host):\(port)"
    }

    /// From a base URL such as `https://api.push.apple.com` or `https://localhost:2197`.
    /// Only `https` URLs with a host are accepted (verification is never switched off).
    public init?(name: String, baseURL: URL) {
        guard baseURL.scheme?.lowercased() == "https", let host = baseURL.host, !host.isEmpty else { return nil }
        self.init(name: name, host: host, port: baseURL.port ?? 443)
    }

    /// Apple's production service.
    public static let production = APNsEnvironment(name: "production", host: "api.push.apple.com")
    /// Apple's development (sandbox) service.
    public static let sandbox = APNsEnvironment(name: "sandbox", host: "api.sandbox.push.apple.com")

    public var description: String { "\(name) (\(authority))" }
}
