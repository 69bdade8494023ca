import Shared
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

    /// `migrate` refuses a `DATABASE_URL` libpq cannot parse as the services do: exit 2,
    /// one line naming the variable, the value (and its password) not echoed.
    @Test(arguments: ["ingress-service", "dispatch-worker"])
    func migrateWithAnUnparsableDatabaseURLExitsWithStatusTwo(executable: String) async throws {
        let result = try await BuiltExecutable.run(
            executable, ["migrate"], environment: ["DATABASE_URL": "host=127.0.0.1 password=S3cretPW bogus"])
        #expect(result.status == 2)
        #expect(result.standardError.hasPrefix("configuration error: DATABASE_URL is not a libpq connection string"))
        #expect(!result.standardError.contains("S3cretPW"))
    }

    /// A mistyped command or flag must not start a service instead (listening, consuming):
    /// it exits 2 with the usage; `--help` prints the usage and exits 0. Nothing here is
    /// configured, so a service that started anyway would fail differently.
    @Test(arguments: ["ingress-service", "dispatch-worker"])
    func unknownArgumentsExitWithStatusTwoAndTheUsage(executable: String) async throws {
        for arguments in [["migrte"], ["--port", "8080"], ["migrate", "now"]] {
            let result = try await BuiltExecutable.run(executable, arguments, environment: [:])
            #expect(result.status == 2, "\(arguments)")
            #expect(result.standardError.hasPrefix("unknown arguments: \(arguments.joined(separator: " "))\nusage: "))
            #expect(result.standardOutput.isEmpty)
        }
        let help = try await BuiltExecutable.run(executable, ["--help"], environment: [:])
        #expect(help.status == 0)
        #expect(help.standardOutput.hasPrefix("usage: \(executable) "))
        #expect(help.standardOutput.contains("\(executable) migrate "))
        #expect(help.standardError.isEmpty)
    }

    @Test func invocationReadsTheArgumentsAfterTheProgramName() {
        let commands: Set = ["migrate", "replay-dead-letters"]
        #expect(ServiceMain.invocation(["worker"], commands: commands) == .service)
        #expect(ServiceMain.invocation(["worker", "migrate"], commands: commands) == .command("migrate"))
        #expect(
            ServiceMain.invocation(["worker", "replay-dead-letters"], commands: commands)
                == .command("replay-dead-letters"))
        #expect(ServiceMain.invocation(["worker", "-h"], commands: commands) == .help)
        #expect(ServiceMain.invocation(["worker", "migrate", "-v"], commands: commands) == .unknown("migrate -v"))
        #expect(ServiceMain.invocation(["worker", "Migrate"], commands: commands) == .unknown("Migrate"))
    }
}
