import Foundation
import Shared
import Synchronization
import TestSupport

@testable import APNsSimulator

/// Teams and keys the simulator knows in these tests. Team A is "ours"; team B
/// owns a bundle id we may not push to.
enum Teams {
    static let teamA = "TEAMAAAAAA"
    static let keyA = "KEYAAAAAAA"
    static let bundleA = "com.example.app"
    /// A second bundle id of team A (for DeviceTokenNotForTopic).
    static let bundleA2 = "com.example.app.second"
    static let teamB = "TEAMBBBBBB"
    static let keyB = "KEYBBBBBBB"
    static let bundleB = "com.example.other"
    static let deviceToken = String(repeating: "a1", count: 32)

    /// Made once per test process.
    static let privateKeyA = try! P256PrivateKey.generate()
    static let privateKeyB = try! P256PrivateKey.generate()

    static func configuration() -> SimulatorConfiguration {
        var configuration = SimulatorConfiguration(teams: [
            teamA: .init(keys: [keyA: privateKeyA.publicKey], bundleIDs: [bundleA, bundleA2]),
            teamB: .init(keys: [keyB: privateKeyB.publicKey], bundleIDs: [bundleB]),
        ])
        configuration.eventLoops = 2
        return configuration
    }

    /// Team A's credential under a fresh id (so pools and shared tokens are the test's own).
    static func credential(
        teamID: String = teamA, keyID: String = keyA, key: P256PrivateKey = privateKeyA
    ) -> APNsCredential {
        APNsCredential(id: "itest-\(UUID().uuidString)", teamID: teamID, keyID: keyID, privateKey: key)
    }

    static let payload = Array(
        #"{"aps":{"alert":{"title":"Hi","body":"New message"},"mutable-content":1},"c":"abc"}"#.utf8)

    static func notification(
        deviceToken: String = deviceToken, topic: String = bundleA, id: UUID? = UUID(), payload: [UInt8] = payload
    ) -> APNsNotification {
        APNsNotification(deviceToken: deviceToken, topic: topic, apnsID: id, payload: payload)
    }

    /// A JSON payload with an `aps` object of exactly `size` bytes.
    static func payload(ofSize size: Int) -> [UInt8] {
        let head = #"{"aps":{"alert":"x"},"p":""#
        let tail = #""}"#
        let padding = String(repeating: "y", count: size - head.utf8.count - tail.utf8.count)
        let bytes = Array((head + padding + tail).utf8)
        precondition(bytes.count == size)
        return bytes
    }
}

/// A clock a provider-token store reads, moved by the test: the real time plus
/// an offset, or (frozen) a fixed moment plus the offset.
final class TestClock: Sendable {
    private let offset = Mutex<TimeInterval>(0)
    private let frozenAt: Date?
    /// Starts `offset` seconds from the real time (negative: in the past).
    init(offset seconds: TimeInterval = 0) {
        frozenAt = nil
        offset.withLock { $0 = seconds }
    }
    /// Stands still at `date` until moved.
    init(frozenAt date: Date) { frozenAt = date }
    func set(offset seconds: TimeInterval) { offset.withLock { $0 = seconds } }
    func advance(seconds: TimeInterval) { offset.withLock { $0 += seconds } }
    var now: Date { (frozenAt ?? Date()).addingTimeInterval(offset.withLock { $0 }) }
}

/// The simulator started in-process on port 0, reached the way a worker reaches
/// it: `APNS_SANDBOX_URL` and `APNS_CA_FILE` read by `CommonConfiguration`.
struct Simulator: Sendable {
    let application: SimulatorApplication
    let directory: URL
    let environment: APNsEnvironment
    let caFile: String

    var state: SimulatorState { application.state }

    static func start(_ adjust: (inout SimulatorConfiguration) -> Void = { _ in }) async throws -> Simulator {
        var configuration = Teams.configuration()
        adjust(&configuration)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-itest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let application = try await SimulatorApplication.start(
            configuration: configuration, listen: ListenAddress(host: "127.0.0.1", port: 0),
            control: ListenAddress(host: "127.0.0.1", port: 0), caFile: directory.appendingPathComponent("ca.pem").path,
            logger: Logger(component: "apns-simulator", minimumLevel: .warning))
        let common = try CommonConfiguration(
            environment: Environment([
                "DATABASE_URL": "postgresql://unused", "REDIS_URL": "redis://127.0.0.1:1/0",
                "CREDENTIAL_KEY": Data(repeating: 7, count: 32).base64EncodedString(),
                "APNS_SANDBOX_URL": "https://localhost:\(application.listenAddress.port)",
                "APNS_CA_FILE": application.caFile,
            ]))
        return Simulator(
            application: application, directory: directory, environment: common.apnsSandbox,
            caFile: common.apnsCAFile ?? "")
    }

    /// Starts a simulator and a client trusting its CA, runs `body`, then shuts both down.
    static func with(
        _ adjust: (inout SimulatorConfiguration) -> Void = { _ in },
        tokens: any ProviderTokenStore = InMemoryProviderTokenStore(),
        client adjustClient: (inout APNsClient.Configuration) -> Void = { _ in },
        _ body: (Simulator, APNsClient) async throws -> Void
    ) async throws {
        let simulator = try await start(adjust)
        let client: APNsClient
        do {
            client = try simulator.client(tokens: tokens, adjustClient)
        } catch {
            await simulator.stop()
            throw error
        }
        do {
            try await body(simulator, client)
        } catch {
            await client.shutdown(deadline: .seconds(1))
            await simulator.stop()
            throw error
        }
        await client.shutdown(deadline: .seconds(1))
        await simulator.stop()
    }

    func client(
        tokens: any ProviderTokenStore = InMemoryProviderTokenStore(),
        _ adjust: (inout APNsClient.Configuration) -> Void = { _ in }
    ) throws -> APNsClient {
        var configuration = APNsClient.Configuration(connectionsPerPool: 1, caFile: caFile)
        adjust(&configuration)
        return try APNsClient(
            configuration: configuration, tokens: tokens,
            logger: Logger(component: "apns-itest", minimumLevel: .error))
    }

    /// `method path` on the control API (HTTP/1.1) with a JSON body; the status and the parsed JSON.
    @discardableResult
    func control(_ method: String, _ path: String, _ json: String? = nil) async throws -> (Int, [String: Any]) {
        let response = try await RawHTTPClient(port: application.controlAddress.port).request(
            method, path, headers: json == nil ? [] : [("Content-Type", "application/json")],
            body: Array((json ?? "").utf8))
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
        return (response.status, object)
    }

    /// `GET /stats`.
    func stats() async throws -> Stats {
        let (status, json) = try await control("GET", "/stats")
        guard status == 200 else { throw RawHTTPClient.Failure(description: "GET /stats answered \(status)") }
        return Stats(json: json)
    }

    func stop() async {
        await application.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// What `GET /stats` says.
struct Stats {
    let json: [String: Any]
    var accepted: Int { json["accepted"] as? Int ?? -1 }
    var rejected: [String: Int] { json["rejected"] as? [String: Int] ?? [:] }
    var connectionsOpened: Int { (json["connections"] as? [String: Int])?["opened"] ?? -1 }
    var providerTokensSeen: Int { (json["providerTokens"] as? [String: Int])?["seen"] ?? -1 }
    var providerTokenVerifications: Int { (json["providerTokens"] as? [String: Int])?["verifications"] ?? -1 }
    var peakOpenStreams: Int { json["peakOpenStreams"] as? Int ?? -1 }
    var streamsRefusedAfterGoAway: Int { json["streamsRefusedAfterGoAway"] as? Int ?? -1 }
    var goAwaysSent: Int { json["goAwaysSent"] as? Int ?? -1 }
}

extension APNsClient {
    /// `send`, with the client's error as a value.
    func result(
        _ notification: APNsNotification, credential: APNsCredential, environment: APNsEnvironment
    ) async -> Result<APNsResponse, APNsClientError> {
        do {
            return .success(try await send(notification, credential: credential, environment: environment))
        } catch let error as APNsClientError {
            return .failure(error)
        } catch {
            return .failure(APNsClientError(.protocolError, "not an APNsClientError: \(error)"))
        }
    }

    /// Sends every notification at once; each outcome by its apns-id.
    func sendAll(
        _ notifications: [APNsNotification], credential: APNsCredential, environment: APNsEnvironment
    ) async -> [UUID: Result<APNsResponse, APNsClientError>] {
        await withTaskGroup(of: (UUID, Result<APNsResponse, APNsClientError>).self) { group in
            for notification in notifications {
                group.addTask {
                    (
                        notification.apnsID!,
                        await self.result(notification, credential: credential, environment: environment)
                    )
                }
            }
            var results: [UUID: Result<APNsResponse, APNsClientError>] = [:]
            for await (id, result) in group { results[id] = result }
            return results
        }
    }
}

/// Failures grouped by what they were, for one readable expectation message.
func failureSummary(_ results: [UUID: Result<APNsResponse, APNsClientError>]) -> [String: Int] {
    var failures: [String: Int] = [:]
    for (id, result) in results {
        switch result {
        case .success(let response) where response.status == 200 && response.apnsID == id: continue
        case .success(let response): failures["\(response)", default: 0] += 1
        case .failure(let error): failures[error.description, default: 0] += 1
        }
    }
    return failures
}
