import Foundation

/// Where and how to connect, parsed from `REDIS_URL`:
/// `redis://[[user]:password@]host[:port][/db]`.
///
/// The password is percent-decoded; `description` never shows it. `rediss://`
/// (TLS) is refused: the hiredis on this platform (0.14) has no TLS support.
public struct RedisURL: Sendable, Equatable, CustomStringConvertible {
    public static let defaultPort = 6379

    public var host: String
    public var port: Int
    /// ACL user (`AUTH user password`); nil means the default user (`AUTH password`).
    public var username: String?
    public var password: String?
    public var database: Int

    public init(
        host: String, port: Int = RedisURL.defaultPort, username: String? = nil, password: String? = nil,
        database: Int = 0
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
    }

    public init(_ text: String) throws(RedisError) {
        func invalid(_ problem: String) -> RedisError {
            RedisError(code: .invalidURL, message: "REDIS_URL \(problem)")
        }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased() else {
            throw invalid("is not a URL")
        }
        if scheme == "rediss" { throw invalid("asks for TLS (rediss://), which this build does not support") }
        guard scheme == "redis" else { throw invalid("must start with redis://") }
        guard var host = components.host, !host.isEmpty else { throw invalid("has no host") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard components.query == nil, components.fragment == nil else {
            throw invalid("must not have a query or fragment")
        }
        let port = components.port ?? Self.defaultPort
        guard (1...65535).contains(port) else { throw invalid("has a port out of range") }

        let path = components.path.drop(while: { $0 == "/" })
        let database: Int
        if path.isEmpty {
            database = 0
        } else {
            guard let number = Int(path), number >= 0 else { throw invalid("must end in /<database number>") }
            database = number
        }

        var username = components.user.flatMap { $0.isEmpty ? nil : $0 }
        let password = components.password
        if username != nil && password == nil {
            throw invalid("has a user but no password (write redis://:password@host for a password alone)")
        }
        if password != nil && username == "default" { username = nil }
        self.init(host: host, port: port, username: username, password: password, database: database)
    }

    public var description: String {
        var text = "redis://"
        if password != nil { text += "\(username ?? ""):***@" }
        text += host.contains(":") ? "[\(host)]" : host
        return text + ":\(port)/\(database)"
    }
}
