import Foundation
import Testing

@testable import Shared

@Suite struct ConfigurationTests {
    static let valid: [String: String] = [
        "DATABASE_URL": "postgresql://pushgate@127.0.0.1:55432/pushgate",
        "REDIS_URL": "redis://127.0.0.1:56379/0",
        "CREDENTIAL_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "PUBLIC_BASE_URL": "https://push.example.com",
    ]

    @Test func validEnvironmentParsesWithDefaults() throws {
        let configuration = try IngressConfiguration(environment: Environment(Self.valid))
        #expect(configuration.listen == ListenAddress(host: "127.0.0.1", port: 8080))
        #expect(configuration.common.credentialKey == Array(0..<32))
        #expect(configuration.common.apnsProductionURL.absoluteString == "https://api.push.apple.com")
        #expect(configuration.adminListen == nil)
        #expect(configuration.trustedProxies.isEmpty)
    }

    @Test(
        arguments: [
            ("DATABASE_URL", nil, "DATABASE_URL is required but not set"),
            ("REDIS_URL", "http://x", "REDIS_URL must start with redis://"),
            ("CREDENTIAL_KEY", "c2hvcnQ=", "CREDENTIAL_KEY must be exactly 32 bytes"),
            ("INGRESS_LISTEN", "8080", "INGRESS_LISTEN must be an IP address and port"),
            ("PUBLIC_BASE_URL", "ftp://x", "PUBLIC_BASE_URL must be an http(s)"),
            ("TRUSTED_PROXIES", "10.0.0.0/8, 300.1.1.1/8", "TRUSTED_PROXIES has an invalid CIDR \"300.1.1.1/8\""),
            ("APNS_CA_FILE", "/nonexistent/ca.pem", "APNS_CA_FILE names a file that does not exist"),
            ("APNS_CA_FILE", #filePath, "APNS_CA_FILE holds no PEM certificate"),  // readable, no certificate
            ("LOG_LEVEL", "loud", "LOG_LEVEL must be one of"),
            ("ADMIN_LISTEN", "127.0.0.1:9000", "ADMIN_TOKEN is required when ADMIN_LISTEN is set"),
            ("INGRESS_LISTEN", "localhost:8080", "INGRESS_LISTEN must be an IP address and port"),
            ("PUBLIC_BASE_URL", "https://push.example.com/#x", "PUBLIC_BASE_URL must be an http(s)"),
            ("PUBLIC_BASE_URL", "https://user:pw@push.example.com", "PUBLIC_BASE_URL must be an http(s)"),
            ("PUBLIC_BASE_URL", "https://push.example.com/api/push/", "PUBLIC_BASE_URL must not end in /api/push"),
            ("STASH_TTL_SECONDS", "3600", "STASH_TTL_SECONDS must be a whole number from 1 to 1800"),
            ("QUEUE_STREAM", "pushgate:queue", "QUEUE_STREAM pushgate:queue has no {hash tag}"),
            ("QUEUE_STREAM", "pushgate:queue:{}", "QUEUE_STREAM pushgate:queue:{} has no {hash tag}"),
            (
                "DATABASE_URL", "postgresql://pushgate:50%off@db/pushgate",
                "DATABASE_URL is not a libpq connection string"
            ),
            // libpq itself reads ports only when it connects (as a server not up yet).
            (
                "DATABASE_URL", "postgresql://u:pw@127.0.0.1:notaport/db",
                "DATABASE_URL is not a libpq connection string"
            ),
            ("DATABASE_URL", "host=127.0.0.1 port=70000", "DATABASE_URL is not a libpq connection string"),
            ("DATABASE_URL", "host=a,b port=5432,x", "DATABASE_URL is not a libpq connection string"),
            ("DATABASE_URL", "host=a,b,c port=1,2", "DATABASE_URL is not a libpq connection string"),
            ("DATABASE_URL", "host=a sslmode=sometimes", "DATABASE_URL is not a libpq connection string"),
            ("DATABASE_URL", "postgresql://a/db?target_session_attrs=primary-ish", "DATABASE_URL is not"),
            // libpq refuses a non-integer one at every connection, as if Postgres did.
            ("DATABASE_URL", "host=a connect_timeout=abc", "DATABASE_URL is not a libpq connection string"),
            ("DATABASE_URL", "postgresql://a/db?keepalives_idle=10s", "DATABASE_URL is not"),
            ("DATABASE_URL", "postgresql://a/db?tcp_user_timeout=99999999999", "DATABASE_URL is not"),
            ("DATABASE_URL", "host=a ssl_min_protocol_version=TLSv1.4", "DATABASE_URL is not"),
            (
                "DATABASE_URL", "host=a ssl_min_protocol_version=TLSv1.3 ssl_max_protocol_version=tlsv1.2",
                "DATABASE_URL is not"
            ),
        ] as [(String, String?, String)])
    func invalidValueNamesTheVariable(variable: String, value: String?, expected: String) {
        var values = Self.valid
        values[variable] = value
        #expect {
            try IngressConfiguration(environment: Environment(values))
        } throws: { error in
            (error as? ConfigurationError)?.description.contains(expected) == true
        }
    }

    /// Ports are checked one per host, an empty one meaning the default.
    @Test func databaseURLsWithSeveralHostsOrDefaultPortsAreValid() {
        for url in [
            "host=a,b port=5432,5433", "host=a,b port=,5433", "postgresql://u@a:5432,b/db", "postgresql:///db",
            "host=/var/run/postgresql port= 5432 ", "host=a,b,c port=5432", "hostaddr=127.0.0.1,::1 port=1,2",
            "host=a sslmode=verify-full", "postgresql://a/db?sslmode=disable&target_session_attrs=read-write",
            "host=a connect_timeout=10 keepalives=1", "postgresql://a/db?keepalives_idle=30&tcp_user_timeout=-1",
            "host=a ssl_min_protocol_version=tlsv1.2 ssl_max_protocol_version=TLSv1.3",
        ] {
            #expect(PostgresConnection.isValidConnectionString(url), "\(url)")
        }
    }

    /// A CA file with a certificate's markers around something else is refused at start
    /// (OpenSSL would refuse it at the worker's start and at every credential probe).
    @Test func aCAFileOpenSSLCannotLoadNamesTheVariable() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-bad-ca-\(getpid()).pem").path
        // Made up here: this file must not hold the marker (the case above reads it).
        let marker = "CERTIFICATE-----"
        try "-----BEGIN \(marker)\ngarbage\n-----END \(marker)\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var values = Self.valid
        values["APNS_CA_FILE"] = path
        #expect {
            try IngressConfiguration(environment: Environment(values))
        } throws: { error in
            (error as? ConfigurationError)?.description.contains("APNS_CA_FILE is not a valid PEM CA bundle") == true
        }
    }

    /// A scheme in capitals is a scheme (RFC 3986); a path prefix (a proxy's) is kept.
    @Test func publicBaseURLsWithAPrefixOrACapitalSchemeAreValid() throws {
        for base in ["HTTPS://push.example.com", "https://example.com/pushgate/"] {
            var values = Self.valid
            values["PUBLIC_BASE_URL"] = base
            #expect(try IngressConfiguration(environment: Environment(values)).publicBaseURL.absoluteString == base)
        }
    }

    /// A public base URL with a port no socket can have is refused: every push URL
    /// handed out would be unusable.
    @Test func aPublicBaseURLWithAnImpossiblePortIsRefused() {
        for base in ["https://push.example.com:0", "https://push.example.com:99999"] {
            var values = Self.valid
            values["PUBLIC_BASE_URL"] = base
            #expect(throws: ConfigurationError.self) { try IngressConfiguration(environment: Environment(values)) }
        }
    }

    /// An invalid DATABASE_URL is refused without its value: it holds the password.
    @Test func anInvalidDatabaseURLIsNotEchoed() {
        var values = Self.valid
        values["DATABASE_URL"] = "postgresql://pushgate:50%off@db/pushgate"
        #expect {
            try IngressConfiguration(environment: Environment(values))
        } throws: { error in
            !"\(error)".contains("50%off")
        }
        #expect(
            !PostgresConnection.scrubPassword(
                "invalid percent-encoded token: \"50%off\"", connectionString: values["DATABASE_URL"]!
            )
            .contains("50%off"))
    }

    /// A value read from a file (a Kubernetes secret) keeps no trailing line break.
    @Test func valuesLoseTrailingLineBreaks() throws {
        var values = Self.valid
        values["ADMIN_LISTEN"] = "127.0.0.1:9000"
        values["ADMIN_TOKEN"] = String(repeating: "t", count: 40) + "\n"
        let configuration = try IngressConfiguration(environment: Environment(values))
        #expect(configuration.adminToken == String(repeating: "t", count: 40))
    }

    @Test func workerDefaultsAndLimits() throws {
        let worker = try WorkerConfiguration(environment: Environment(Self.valid))
        #expect(worker.streams == [WorkerConfiguration.defaultStream])
        #expect(worker.apnsConnections == 4)
        // Half the worker's in-flight messages per APNs destination by default, at most all.
        #expect(worker.maxInFlightPerDestination == 1000)
        var smaller = Self.valid
        smaller["WORKER_MAX_IN_FLIGHT"] = "300"
        #expect(try WorkerConfiguration(environment: Environment(smaller)).maxInFlightPerDestination == 150)
        smaller["WORKER_MAX_IN_FLIGHT_PER_DESTINATION"] = "301"
        #expect(throws: ConfigurationError.self) { try WorkerConfiguration(environment: Environment(smaller)) }
        // A retry cap below the first delay would make every delay the cap.
        var retries = Self.valid
        retries["WORKER_RETRY_BASE_MS"] = "100000"
        retries["WORKER_RETRY_CAP_MS"] = "10"
        #expect(
            throws: ConfigurationError(
                variable: "WORKER_RETRY_CAP_MS", problem: "must be at least WORKER_RETRY_BASE_MS (100000)")
        ) { try WorkerConfiguration(environment: Environment(retries)) }
        retries["WORKER_RETRY_CAP_MS"] = "100000"
        #expect(try WorkerConfiguration(environment: Environment(retries)).retryCapMilliseconds == 100_000)
        // A default consumer name is new at every start: two defaults never match.
        let again = try WorkerConfiguration(environment: Environment(Self.valid))
        #expect(worker.workerID.hasPrefix("\(ProcessInfo.processInfo.hostName)-\(getpid())-"))
        #expect(worker.workerID != again.workerID)
        var streams = Self.valid
        streams["WORKER_STREAMS"] = "pushgate:queue:{0}, pushgate:queue:{1}"
        #expect(
            try WorkerConfiguration(environment: Environment(streams)).streams == [
                "pushgate:queue:{0}", "pushgate:queue:{1}",
            ])
        streams["WORKER_STREAMS"] = "pushgate:queue:{0},pushgate:queue"
        #expect {
            try WorkerConfiguration(environment: Environment(streams))
        } throws: { error in
            (error as? ConfigurationError)?.description.contains("WORKER_STREAMS pushgate:queue has no {hash tag}")
                == true
        }
        // Named twice, its two readers would take each other's entries in flight for orphans.
        streams["WORKER_STREAMS"] = "pushgate:queue:{0}, pushgate:queue:{0}"
        #expect(
            throws: ConfigurationError(variable: "WORKER_STREAMS", problem: "names a stream more than once")
        ) { try WorkerConfiguration(environment: Environment(streams)) }
        for url in ["https://localhost:0", "https://localhost:99999"] {
            var apns = Self.valid
            apns["APNS_PRODUCTION_URL"] = url
            #expect(throws: ConfigurationError.self) { try WorkerConfiguration(environment: Environment(apns)) }
        }
        var values = Self.valid
        values["APNS_CONNECTIONS"] = "0"
        #expect(
            throws: ConfigurationError(variable: "APNS_CONNECTIONS", problem: "must be a whole number from 1 to 64")
        ) {
            try WorkerConfiguration(environment: Environment(values))
        }
    }

    @Test func cidrMatchesIPv4IPv6AndMappedAddresses() throws {
        let v4 = try #require(CIDR("10.1.0.0/16"))
        #expect(v4.contains("10.1.200.3"))
        #expect(!v4.contains("10.2.0.1"))
        #expect(v4.contains("::ffff:10.1.2.3"))
        let v6 = try #require(CIDR("fd00::/8"))
        #expect(v6.contains("fd12::1"))
        #expect(!v6.contains("fe80::1"))
        #expect(CIDR("192.168.1.7")?.description == "192.168.1.7/32")
        #expect(CIDR("10.0.0.0/33") == nil)
        // An IPv4-mapped network is the IPv4 network (clients are seen as IPv4).
        let mapped = try #require(CIDR("::ffff:127.0.0.0/120"))
        #expect(mapped.description == "127.0.0.0/24")
        #expect(mapped.contains("127.0.0.2"))
        #expect(!mapped.contains("127.0.1.2"))
        #expect(CIDR("::ffff:0.0.0.0/64")?.network.count == 16)  // wider than the mapped range: IPv6
    }
}
