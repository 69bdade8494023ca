import TestSupport
import Testing

/// A bad deployment must fail at start-up, loudly and precisely.
@Suite struct ServiceStartupTests {
    static let valid = [
        "DATABASE_URL": TestEnvironment.databaseURL, "REDIS_URL": TestEnvironment.redisURL,
        "CREDENTIAL_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "PUBLIC_BASE_URL": "https://push.example.com",
    ]

    @Test(
        arguments: [
            (
                "ingress-service", "CREDENTIAL_KEY", "c2hvcnQ=",
                "configuration error: CREDENTIAL_KEY must be exactly 32 bytes, base64-encoded\n"
            ),
            (
                "ingress-service", "PUBLIC_BASE_URL", nil,
                "configuration error: PUBLIC_BASE_URL is required but not set\n"
            ),
            (
                "dispatch-worker", "APNS_CONNECTIONS", "many",
                "configuration error: APNS_CONNECTIONS must be a whole number from 1 to 64\n"
            ),
            (
                "dispatch-worker", "REDIS_URL", "rediss://x:6379",
                "configuration error: REDIS_URL asks for TLS (rediss://), which this build does not support\n"
            ),
        ] as [(String, String, String?, String)])
    func invalidConfigurationExitsWithStatusTwoAndOneLine(
        executable: String, variable: String, value: String?, line: String
    ) async throws {
        var environment = Self.valid
        environment[variable] = value
        let result = try await BuiltExecutable.run(executable, [], environment: environment)
        #expect(result.status == 2)
        #expect(result.standardError == line)
    }
}
