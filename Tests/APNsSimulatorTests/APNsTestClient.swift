import Foundation
import Shared
import TestSupport

@testable import APNsSimulator

/// An HTTP/2 client on `Shared.HTTP2Connection` that talks to the simulator the
/// way the dispatch worker will (TLS verified against the simulator's CA file,
/// ALPN h2). Loop-confined; the test reads it through `loop.submit`.
final class APNsTestClient: HTTP2ConnectionDelegate, @unchecked Sendable {
    struct Response: Sendable {
        let status: Int
        let headers: [HTTP2Header]
        let body: [UInt8]
        var reason: String? {
            (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["reason"] as? String
        }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    let loop: EventLoop
    private var connection: HTTP2Connection?
    var responses: [Int32: Response] = [:]
    var resets: [Int32: UInt32] = [:]
    var maxStreamsSeen: [Int] = []
    var goAway: (lastStreamID: Int32, errorCode: UInt32)?
    var isReady = false
    var isClosed = false

    private init(loop: EventLoop) { self.loop = loop }

    static func connect(to port: Int, caFile: String, loop: EventLoop) async throws -> APNsTestClient {
        let client = APNsTestClient(loop: loop)
        let context = try TLSContext.client(extraCAFile: caFile, alpn: ["h2"])
        try await loop.submit {
            let http2 = try HTTP2Connection(role: .client)
            http2.delegate = client
            client.connection = http2
            let tls = try TLSStream(
                connectingTo: "localhost", port: port, context: context, requireALPN: "h2", timeout: .seconds(5),
                loop: loop, delegate: http2)
            http2.attach(tls)
        }
        try await client.wait("TLS and HTTP/2 up") { $0.isReady }
        return client
    }

    /// Sends a request; returns its stream id at once.
    func send(_ headers: [HTTP2Header], body: [UInt8] = Fixtures.payload) async throws -> Int32 {
        try await loop.submit { try self.connection!.sendRequest(headers: headers, body: body) }
    }

    /// Sends a request and waits for its response.
    func request(_ headers: [HTTP2Header], body: [UInt8] = Fixtures.payload) async throws -> Response {
        let id = try await send(headers, body: body)
        return try await response(id)
    }

    func response(_ id: Int32) async throws -> Response {
        try await wait("response to stream \(id)") { $0.responses[id] != nil || $0.resets[id] != nil || $0.isClosed }
        guard let response = try await read({ $0.responses[id] }) else {
            throw Failure(
                description:
                    "stream \(id) got no response (reset: \(String(describing: try await read { $0.resets[id] })))")
        }
        return response
    }

    /// Reads client state on its loop.
    func read<Value: Sendable>(_ body: @escaping @Sendable (APNsTestClient) -> Value) async throws -> Value {
        try await loop.submit { body(self) }
    }

    /// Polls `condition` on the loop until it holds (or 5 s pass).
    func wait(_ what: String, _ condition: @escaping @Sendable (APNsTestClient) -> Bool) async throws {
        guard try await Poll.until(timeout: .seconds(5), interval: .milliseconds(5), { try await read(condition) })
        else {
            throw Failure(description: "timed out waiting for \(what)")
        }
    }

    func close() async {
        _ = try? await loop.submit { self.connection?.close() }
    }

    // MARK: HTTP2ConnectionDelegate

    func connectionDidBecomeReady(_ connection: HTTP2Connection) { isReady = true }
    func connection(
        _ connection: HTTP2Connection, streamDidFinish streamID: Int32, headers: [HTTP2Header], body: [UInt8]
    ) {
        responses[streamID] = Response(status: Int(headers[":status"] ?? "") ?? 0, headers: headers, body: body)
    }
    func connection(_ connection: HTTP2Connection, streamWasReset streamID: Int32, errorCode: UInt32) {
        resets[streamID] = errorCode
    }
    func connection(_ connection: HTTP2Connection, didChangeMaxConcurrentStreams limit: Int) {
        maxStreamsSeen.append(limit)
    }
    func connection(
        _ connection: HTTP2Connection, didReceiveGoAway lastStreamID: Int32, errorCode: UInt32, debugData: [UInt8]
    ) {
        goAway = (lastStreamID, errorCode)
    }
    func connection(_ connection: HTTP2Connection, didCloseWith error: (any Error)?) { isClosed = true }
}

/// The simulator started in-process on port 0, with a client event loop.
struct RunningSimulator: Sendable {
    let application: SimulatorApplication
    let clientLoop: EventLoop
    let directory: URL

    static func start(_ configuration: SimulatorConfiguration = Fixtures.configuration()) async throws
        -> RunningSimulator
    {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-sim-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let application = try await SimulatorApplication.start(
            configuration: configuration, listen: ListenAddress(host: "127.0.0.1", port: 0),
            control: ListenAddress(host: "127.0.0.1", port: 0), caFile: directory.appendingPathComponent("ca.pem").path,
            logger: Logger(component: "apns-simulator-test", minimumLevel: .warning))
        return RunningSimulator(
            application: application, clientLoop: EventLoop(name: "apns-client"), directory: directory)
    }

    var control: RawHTTPClient { RawHTTPClient(port: application.controlAddress.port) }

    func connect() async throws -> APNsTestClient {
        try await APNsTestClient.connect(
            to: application.listenAddress.port, caFile: application.caFile, loop: clientLoop)
    }

    /// `method path` on the control API with a JSON body; returns status and parsed JSON.
    func controlRequest(_ method: String, _ path: String, _ json: String? = nil) async throws -> (Int, [String: Any]) {
        let response = try await control.request(
            method, path, headers: json == nil ? [] : [("Content-Type", "application/json")],
            body: Array((json ?? "").utf8))
        let object = (try? JSONSerialization.jsonObject(with: Data(response.body))) as? [String: Any] ?? [:]
        return (response.status, object)
    }

    /// The simulator first (its GOAWAY lets clients close), then the client loop.
    func stop() async {
        await application.shutdown()
        clientLoop.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }
}
