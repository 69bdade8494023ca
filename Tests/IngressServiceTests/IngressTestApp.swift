import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// One ingress started on port 0 against the test Postgres and Redis, with its
/// own Redis namespace and queue stream, so tests run in parallel.
final class IngressTestApp: @unchecked Sendable {
    let app: IngressApplication
    let client: RawHTTPClient
    let keys: RedisKeys
    let namespace: String
    let logs: CapturedLogLines

    static let publicBase = "https://push.example.test"

    init(_ overrides: [String: String] = [:]) throws {
        let unique = UInt64.random(in: 0...UInt64.max)
        namespace = "pushgate-test:\(unique)"
        keys = RedisKeys(stream: "\(namespace):queue:{t\(unique)}", namespace: namespace)
        var environment = [
            "DATABASE_URL": TestEnvironment.databaseURL, "REDIS_URL": TestEnvironment.redisURL,
            "CREDENTIAL_KEY": Data(SecureRandom.bytes(32)).base64EncodedString(),
            "PUBLIC_BASE_URL": Self.publicBase, "INGRESS_LISTEN": "127.0.0.1:0",
        ]
        environment.merge(overrides) { _, new in new }
        let configuration = try IngressConfiguration(environment: Environment(environment))
        let (logger, lines) = TestEnvironment.capturingLogger("ingress")
        logs = lines
        app = try buildApplication(configuration: configuration, logger: logger, keys: keys)
        try app.start(sweep: false)
        client = RawHTTPClient(port: app.port)
    }

    /// Stops the server and deletes this app's Redis keys.
    func stop() async {
        let found = (try? await app.redis.send("KEYS", namespace + ":*"))?.array ?? []
        let names = found.compactMap(\.bytes)
        if !names.isEmpty { _ = try? await app.redis.send(argv: [Array("DEL".utf8)] + names) }
        await app.shutdown(deadline: .seconds(2))
    }

    /// Runs `body` with a started app and always stops it.
    static func with(
        _ overrides: [String: String] = [:], _ body: (IngressTestApp) async throws -> Void
    ) async throws {
        let app = try IngressTestApp(overrides)
        do {
            try await body(app)
        } catch {
            await app.stop()
            throw error
        }
        await app.stop()
    }

    var redis: RedisClient { app.redis }
    var postgres: PostgresClient { app.postgres }

    // MARK: requests

    func request(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = []
    ) async throws -> RawHTTPClient.Response {
        try await client.request(method, path, headers: headers, body: body)
    }

    func register(
        topic: String, token: String = Fixture.token(), sandbox: Bool = false, extra: String = ""
    ) async throws -> RawHTTPClient.Response {
        let json = #"{"topic": "\#(topic)", "token": "\#(token)", "sandbox": \#(sandbox)\#(extra)}"#
        return try await request("POST", "/api/push/v1/subscriptions", body: Array(json.utf8))
    }

    /// Registers and returns (id, secret); fails the test unless 201.
    func subscribe(topic: String, sandbox: Bool = false, activate: Bool = true) async throws -> (
        id: String, secret: String
    ) {
        let response = try await register(topic: topic, sandbox: sandbox)
        try #require(response.status == 201, "registration answered \(response.status) \(response.text)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String])
        let id = try #require(object["id"])
        let secret = try #require(object["secret"])
        if activate {
            let activated = try await request(
                "POST", "/api/push/v1/subscriptions/\(id)/activate", headers: [("Authorization", "Bearer \(secret)")])
            try #require(activated.status == 204)
        }
        return (id, secret)
    }

    func push(
        _ id: String, body: [UInt8] = Fixture.message(), headers: [(String, String)] = Fixture.pushHeaders
    ) async throws -> RawHTTPClient.Response {
        try await request("POST", "/api/push/p/\(id)", headers: headers, body: body)
    }

    // MARK: queue

    /// The messages on the queue, in order (an entry holds one script run's).
    func queueEntries() async throws -> [QueueMessage] {
        let reply = try await redis.send("XRANGE", keys.stream, "-", "+")
        return try (reply.array ?? []).flatMap { entry in
            let fields = entry.array?[1].array?.compactMap(\.bytes) ?? []
            return try QueueMessage.messages(in: StreamEntryFields(fields))
        }
    }

    /// How many messages are on the queue.
    func queueLength() async throws -> Int {
        try await queueEntries().count
    }
}

/// The spec's error body.
func errorBody(_ code: Int, _ message: String) -> String { #"{"error": "\#(code) \#(message)"}"# }
