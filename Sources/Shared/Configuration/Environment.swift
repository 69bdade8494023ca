import Foundation

/// Typed, validating reads of environment variables. Each accessor throws a
/// `ConfigurationError` naming the variable, so a bad deployment fails at start-up.
public struct Environment: Sendable {
    public let values: [String: String]

    public init(_ values: [String: String] = ProcessInfo.processInfo.environment) {
        self.values = values
    }

    /// The value, or nil when unset or empty.
    public func optional(_ name: String) -> String? {
        // Line breaks too: a value read from a file (a Kubernetes secret made with
        // `--from-file`) ends with one, and an ADMIN_TOKEN with it would match no header.
        guard let value = values[name]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty else {
            return nil
        }
        return value
    }

    public func required(_ name: String) throws(ConfigurationError) -> String {
        guard let value = optional(name) else {
            throw ConfigurationError(variable: name, problem: "is required but not set")
        }
        return value
    }

    public func integer(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws(ConfigurationError)
        -> Int
    {
        guard let text = optional(name) else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw ConfigurationError(
                variable: name, problem: "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    /// A `limit/seconds` rate limit (`RateLimit`).
    public func rateLimit(_ name: String, default fallback: RateLimit) throws(ConfigurationError) -> RateLimit {
        guard let text = optional(name) else { return fallback }
        guard let limit = RateLimit(text) else {
            throw ConfigurationError(variable: name, problem: "must be limit/seconds, e.g. 120/60")
        }
        return limit
    }

    public func listenAddress(_ name: String) throws(ConfigurationError) -> ListenAddress? {
        guard let text = optional(name) else { return nil }
        // An IP address: the servers bind to one and do not resolve names.
        guard let address = ListenAddress(text), CIDR.parseAddress(address.host) != nil else {
            throw ConfigurationError(
                variable: name,
                problem: "must be an IP address and port (e.g. 127.0.0.1:8080, 0.0.0.0:8080 or [::1]:8080)")
        }
        return address
    }

    public func httpsURL(_ name: String, default fallback: String) throws(ConfigurationError) -> URL {
        let text = optional(name) ?? fallback
        guard let url = URL(string: text), url.scheme == "https", url.host?.isEmpty == false,
            url.port.map({ (1...65535).contains($0) }) ?? true
        else {
            throw ConfigurationError(
                variable: name, problem: "must be an https:// URL with a host (and a port of 1–65535)")
        }
        return url
    }

    public func readableFile(_ name: String) throws(ConfigurationError) -> String? {
        guard let path = optional(name) else { return nil }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw ConfigurationError(variable: name, problem: "names a file that does not exist or cannot be read")
        }
        return path
    }
}

/// `host:port` for a listening socket. IPv6 hosts are written in brackets.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public init?(_ text: String) {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
                return nil
            }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else { return nil }
        self.init(host: String(host), port: port)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
