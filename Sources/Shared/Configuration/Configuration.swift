import Foundation

/// Settings both services read.
///
/// Environment variables:
/// - `DATABASE_URL` (required): libpq connection string or `postgresql://` URL.
/// - `REDIS_URL` (required): `redis://[:password@]host:port[/db]`.
/// - `CREDENTIAL_KEY` (required): 32 bytes, base64; seals `.p8` keys at rest.
/// - `APNS_PRODUCTION_URL`, `APNS_SANDBOX_URL`: default Apple's hosts.
/// - `APNS_CA_FILE`: extra CA bundle to trust (verification is never switched off).
/// - `LOG_LEVEL`: debug, info (default), notice, warning, error.
public struct CommonConfiguration: Sendable {
    public var databaseURL: String
    public var redisURL: String
    /// The raw 32-byte key for AES-256-GCM. Never logged.
    public var credentialKey: [UInt8]
    public var apnsProductionURL: URL
    public var apnsSandboxURL: URL
    public var apnsCAFile: String?
    public var logLevel: Logger.Level

    public init(environment: Environment) throws(ConfigurationError) {
        databaseURL = try environment.required("DATABASE_URL")
        redisURL = try environment.required("REDIS_URL")
        do {
            _ = try RedisURL(redisURL)
        } catch {
            // RedisURL's messages already name the variable: "REDIS_URL must start with redis://".
            let problem = error.message.hasPrefix("REDIS_URL ") ? String(error.message.dropFirst(10)) : error.message
            throw ConfigurationError(variable: "REDIS_URL", problem: problem)
        }
        let keyText = try environment.required("CREDENTIAL_KEY")
        guard let key = Data(base64Encoded: keyText), key.count == 32 else {
            throw ConfigurationError(variable: "CREDENTIAL_KEY", problem: "must be exactly 32 bytes, base64-encoded")
        }
        credentialKey = Array(key)
        apnsProductionURL = try environment.httpsURL("APNS_PRODUCTION_URL", default: "https://api.push.apple.com")
        apnsSandboxURL = try environment.httpsURL("APNS_SANDBOX_URL", default: "https://api.sandbox.push.apple.com")
        apnsCAFile = try environment.readableFile("APNS_CA_FILE")
        logLevel = try Self.logLevel(environment)
    }

    static func logLevel(_ environment: Environment) throws(ConfigurationError) -> Logger.Level {
        guard let name = environment.optional("LOG_LEVEL") else { return .info }
        guard let level = Logger.Level(name: name) else {
            throw ConfigurationError(variable: "LOG_LEVEL", problem: "must be one of debug, info, notice, warning, error")
        }
        return level
    }
}

/// The ingress service's settings.
///
/// Environment variables, beyond `CommonConfiguration`'s:
/// - `INGRESS_LISTEN`: public API `host:port`, default `127.0.0.1:8080`.
/// - `ADMIN_LISTEN`: admin API `host:port`; the admin API is off when unset.
/// - `ADMIN_TOKEN`: bearer token of the admin API, at least 32 characters; required with `ADMIN_LISTEN`.
/// - `PUBLIC_BASE_URL` (required): base of the push `url` returned at registration.
/// - `TRUSTED_PROXIES`: comma-separated CIDRs whose `X-Forwarded-For` is believed.
public struct IngressConfiguration: Sendable {
    public var common: CommonConfiguration
    public var listen: ListenAddress
    public var adminListen: ListenAddress?
    public var adminToken: String?
    public var publicBaseURL: URL
    public var trustedProxies: [CIDR]

    public init(environment: Environment = Environment()) throws(ConfigurationError) {
        common = try CommonConfiguration(environment: environment)
        listen = try environment.listenAddress("INGRESS_LISTEN") ?? ListenAddress(host: "127.0.0.1", port: 8080)
        adminListen = try environment.listenAddress("ADMIN_LISTEN")
        adminToken = environment.optional("ADMIN_TOKEN")
        if adminListen != nil {
            guard let token = adminToken else {
                throw ConfigurationError(variable: "ADMIN_TOKEN", problem: "is required when ADMIN_LISTEN is set")
            }
            guard token.count >= 32 else {
                throw ConfigurationError(variable: "ADMIN_TOKEN", problem: "must be at least 32 characters")
            }
        }
        let base = try environment.required("PUBLIC_BASE_URL")
        guard let url = URL(string: base), ["http", "https"].contains(url.scheme ?? ""), url.host?.isEmpty == false,
            url.query == nil
        else {
            throw ConfigurationError(variable: "PUBLIC_BASE_URL", problem: "must be an http(s):// URL with a host and no query")
        }
        publicBaseURL = url
        trustedProxies = try Self.cidrs(environment.optional("TRUSTED_PROXIES"))
    }

    static func cidrs(_ text: String?) throws(ConfigurationError) -> [CIDR] {
        guard let text else { return [] }
        var result: [CIDR] = []
        for part in text.split(separator: ",") {
            let item = part.trimmingCharacters(in: .whitespaces)
            guard let cidr = CIDR(item) else {
                throw ConfigurationError(variable: "TRUSTED_PROXIES", problem: "has an invalid CIDR \"\(item)\"")
            }
            result.append(cidr)
        }
        return result
    }
}

/// The dispatch worker's settings.
///
/// Environment variables, beyond `CommonConfiguration`'s:
/// - `WORKER_ID`: consumer name in the queue's consumer group, default `<hostname>-<pid>`.
/// - `WORKER_STREAMS`: comma-separated queue streams to read, default `pushgate:queue:{0}`.
/// - `APNS_CONNECTIONS`: HTTP/2 connections per (credential, environment) pool, default 4.
/// - `METRICS_LISTEN`: `/metrics`, `/healthz`, `/readyz`, default `127.0.0.1:9091`.
public struct WorkerConfiguration: Sendable {
    public static let defaultStream = "pushgate:queue:{0}"

    public var common: CommonConfiguration
    public var workerID: String
    public var streams: [String]
    public var apnsConnections: Int
    public var metricsListen: ListenAddress

    public init(environment: Environment = Environment()) throws(ConfigurationError) {
        common = try CommonConfiguration(environment: environment)
        workerID = environment.optional("WORKER_ID") ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())"
        guard workerID.allSatisfy({ !$0.isWhitespace }) else {
            throw ConfigurationError(variable: "WORKER_ID", problem: "must not contain spaces")
        }
        let streams = (environment.optional("WORKER_STREAMS") ?? Self.defaultStream)
            .split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !streams.isEmpty else {
            throw ConfigurationError(variable: "WORKER_STREAMS", problem: "must name at least one stream")
        }
        self.streams = streams
        apnsConnections = try environment.integer("APNS_CONNECTIONS", default: 4, range: 1...64)
        metricsListen = try environment.listenAddress("METRICS_LISTEN") ?? ListenAddress(host: "127.0.0.1", port: 9091)
    }
}
