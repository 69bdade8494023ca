import Foundation
import Shared
import TestSupport

@testable import IngressService

/// A running admin API on port 0 against the real Postgres, with captured logs.
struct AdminHarness {
    static let token = "admin-test-token-0123456789abcdef0123456789"

    let server: HTTPServer
    let postgres: PostgresClient
    let logs: CapturedLogLines
    let credentialKey: [UInt8]

    var port: Int { server.port }
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts the API with `probe`, runs `body`, stops it.
    static func with(
        probe: any CredentialProbe = NoProbeNeeded(), invalidator: any CacheInvalidator = NoCacheInvalidator(),
        _ body: (AdminHarness) async throws -> Void
    ) async throws {
        let (logger, logs) = TestEnvironment.capturingLogger("ingress")
        let postgres = PostgresClient(url: TestEnvironment.databaseURL, maximumConnections: 4)
        let key = SecureRandom.bytes(32)
        let api = AdminAPI(
            token: token, postgres: postgres, liveness: PostgresLiveness(postgres: postgres),
            sealer: try PushCredentialSealer(key: key), probe: probe,
            invalidator: invalidator, logger: logger)
        let server = HTTPServer(
            configuration: .init(address: ListenAddress(host: "127.0.0.1", port: 0)), handler: api, logger: logger)
        try server.start()
        let harness = AdminHarness(server: server, postgres: postgres, logs: logs, credentialKey: key)
        do {
            try await body(harness)
        } catch {
            await server.shutdown(deadline: .seconds(1))
            postgres.close()
            throw error
        }
        await server.shutdown(deadline: .seconds(1))
        postgres.close()
    }

    struct Answer {
        let status: Int
        let text: String
        /// Header names in lower case.
        var headers: [String: String] = [:]
        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
        }
        var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
        var errorMessage: String? { (json["error"] as? [String: Any])?["message"] as? String }
    }

    /// One request with the admin token; `body` is serialized as JSON.
    func call(
        _ method: String, _ path: String, _ body: [String: Any]? = nil, token: String? = AdminHarness.token,
        headers: [(String, String)] = []
    ) async throws -> Answer {
        var allHeaders = headers
        if let token { allHeaders.append(("Authorization", "Bearer \(token)")) }
        var bytes: [UInt8] = []
        if let body {
            allHeaders.append(("Content-Type", "application/json"))
            bytes = Array(try JSONSerialization.data(withJSONObject: body))
        }
        let response = try await RawHTTPClient(port: port).request(
            method, "/admin/v1" + path, headers: allHeaders, body: bytes)
        return Answer(status: response.status, text: response.text, headers: response.headers)
    }

    /// `call` with a raw body.
    func call(_ method: String, _ path: String, raw: String) async throws -> Answer {
        let response = try await RawHTTPClient(port: port).request(
            method, "/admin/v1" + path,
            headers: [("Authorization", "Bearer \(AdminHarness.token)"), ("Content-Type", "application/json")],
            body: Array(raw.utf8))
        return Answer(status: response.status, text: response.text)
    }

    /// Holds a row lock on `account` for `seconds`, on a connection of its own, as a
    /// long transaction would. Returns once the lock is held (a fixed sleep is not
    /// enough under load), with the task that ends when the lock is let go.
    static func lockAccount(_ account: String, forSeconds seconds: Int) async -> Task<Void, any Error> {
        let (held, signal) = AsyncStream.makeStream(of: Void.self)
        let holding = Task {
            defer { signal.finish() }
            let locker = PostgresClient(url: TestEnvironment.databaseURL, maximumConnections: 1)
            defer { locker.close() }
            try await locker.withTransaction { connection in
                _ = try await connection.query("SELECT id FROM accounts WHERE id = \(account) FOR UPDATE")
                signal.yield()
                _ = try await connection.query("SELECT pg_sleep(\(seconds))")
            }
        }
        for await _ in held { break }  // or the task failed: its value throws
        return holding
    }

    /// A fresh id for this test run.
    static func unique(_ prefix: String) -> String {
        "\(prefix)-\(SecureRandom.bytes(6).map { String(format: "%02x", $0) }.joined())"
    }

    /// Creates an account on `plan` through the API; returns its id.
    func account(plan: String = "plus") async throws -> String {
        let id = Self.unique("acct")
        let answer = try await call("POST", "/accounts", ["id": id, "name": "Test", "plan": plan])
        precondition(answer.status == 201, "account create: \(answer.text)")
        return id
    }

    /// Creates an app through the API; returns its id.
    func app(account: String) async throws -> String {
        let id = Self.unique("app")
        let answer = try await call("POST", "/accounts/\(account)/apps", ["id": id, "name": "Test app"])
        precondition(answer.status == 201, "app create: \(answer.text)")
        return id
    }

    /// Puts identifiers and a credential row in place directly (for tests about what
    /// happens after a save, not the save itself).
    func insertIdentifier(_ bundleID: String, app: String) async throws {
        try await postgres.execute("INSERT INTO app_identifiers (bundle_id, app_id) VALUES (\(bundleID), \(app))")
    }

    /// A subscription row on `app`/`topic`; returns its id.
    func insertSubscription(app: String, topic: String, user: String? = nil) async throws -> String {
        let id = Self.unique("sub")
        try await postgres.execute(
            """
            INSERT INTO subscriptions (id, app_id, topic, device_token, sandbox, secret_hash, user_id)
            VALUES (\(id), \(app), \(topic), \(String(repeating: "ab", count: 32)), false, \(SHA256.hash(id)), \(user))
            """)
        return id
    }

    func subscriptionExists(_ id: String) async throws -> Bool {
        try await !postgres.query("SELECT 1 FROM subscriptions WHERE id = \(id)").isEmpty
    }

    /// A credential row sealed like the API does, without asking APNs (for delete/warning tests).
    func insertCredential(account: String, teamID: String = "TEAM000001", keyID: String? = nil) async throws -> String {
        let id = Self.unique("cred")
        let sealer = try PushCredentialSealer(key: credentialKey)
        let sealed = try sealer.seal(try P256PrivateKey.generate(), credentialID: id)
        let keyID = keyID ?? String(Self.unique("K").uppercased().replacingOccurrences(of: "-", with: "").prefix(10))
        try await postgres.execute(
            """
            INSERT INTO push_credentials (id, account_id, team_id, key_id, sealed_key)
            VALUES (\(id), \(account), \(teamID), \(keyID), \(sealed))
            """)
        return id
    }
}

/// For tests that must not reach APNs: any probe fails the request (502), so a test
/// that unexpectedly needs Apple shows it.
struct NoProbeNeeded: CredentialProbe {
    func probe(teamID: String, keyID: String, privateKey: P256PrivateKey, topics: [String])
        async throws(CredentialProbeError) -> [CredentialProbeResult]
    {
        throw CredentialProbeError(message: "this test does not expect an APNs probe")
    }
}
