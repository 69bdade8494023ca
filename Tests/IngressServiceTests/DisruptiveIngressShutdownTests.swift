import Foundation
import Shared
import Synchronization
import TestSupport
import Testing

/// Starts the built `ingress-service` executable, sends SIGTERM while a request is
/// in flight, and expects the request answered and exit status 0. Serialized with
/// the other disruptive suites because it spawns a process.
@Suite(.serialized) struct DisruptiveIngressShutdownTests {
    @Test func sigtermStopsAcceptingFinishesInFlightRequestsAndExitsZero() async throws {
        let binary = TestEnvironment.repositoryRoot.appendingPathComponent(".build/debug/ingress-service").path
        try #require(FileManager.default.isExecutableFile(atPath: binary))
        // Port 0: a port picked at random may be in use (the tests' own connections
        // take ports from the same range); the `started` line names the bound one.
        let process = try SpawnedProcess(
            binary,
            [],
            environment: ProcessInfo.processInfo.environment.merging([
                "DATABASE_URL": TestEnvironment.databaseURL, "REDIS_URL": TestEnvironment.redisURL,
                "CREDENTIAL_KEY": Data(SecureRandom.bytes(32)).base64EncodedString(),
                "PUBLIC_BASE_URL": "https://push.example.test", "INGRESS_LISTEN": "127.0.0.1:0",
                "LOG_LEVEL": "notice",
            ]) { _, new in new }, standardError: .pipe)
        let log = ProcessLog(reading: try #require(process.standardError))
        log.startReading()

        let started = try await onThread { log.waitForStart(timeout: 20) }
        let port = try #require(started, "no started line; the ingress wrote: \(log.text)")

        let client = RawHTTPClient(port: port)
        #expect(try await client.request("GET", "/healthz").status == 200)

        // A request whose body is still arriving when SIGTERM comes.
        let (halfSent, signalHalfSent) = AsyncStream<Void>.makeStream()
        let slowDone = Flag()
        let slow = Task { () -> Int in
            let raw = try await onThread { () -> [UInt8] in
                let connection = try SlowSender(port: port)
                defer { connection.close() }
                return try connection.sendSlowly(afterFirstHalf: { signalHalfSent.yield() })
            }
            slowDone.set()
            return try RawHTTPClient.parse(raw).status
        }
        for await _ in halfSent { break }
        // Sent is not read: SIGTERM before the ingress has the head would find nothing
        // in flight. The scrape is in flight itself, so 2 means the slow request too.
        let inFlight = try await Poll.until(timeout: .seconds(10)) {
            let metrics = try await client.request("GET", "/metrics").text
            return metrics.contains("\npushgate_ingress_requests_in_flight 2\n")
        }
        #expect(inFlight)
        process.signal(SIGTERM)
        // Stops accepting: a new connection is refused at once, while the slow request
        // is still under way (one left waiting in the listen backlog would only fail
        // when the drain ends).
        let refused = try await Poll.until(timeout: .seconds(5)) {
            (try? await RawHTTPClient(port: port).request("GET", "/healthz")) == nil
        }
        #expect(refused)
        #expect(!slowDone.isSet, "refused only once the drain had ended")
        let status = try await slow.value
        #expect(status == 404, "answered \(status)")  // answered (unknown subscription), not dropped
        #expect(await process.waitForExit() == .init(exited: true, status: 0), "the ingress wrote: \(log.text)")
    }
}

/// The child's standard error, read to its end on a thread of its own (a full pipe
/// would block the child), and the port its `started` line names.
///
/// Why @unchecked Sendable is safe: `source` is only read by the reader thread, and
/// what it read is shared through the mutex and the semaphore.
private final class ProcessLog: @unchecked Sendable {
    private let source: FileHandle
    private let state = Mutex<(text: String, ended: Bool)>(("", false))
    private let changed = DispatchSemaphore(value: 0)

    init(reading source: FileHandle) { self.source = source }

    var text: String { state.withLock { $0.text } }

    func startReading() {
        Thread.detachNewThread { [self] in
            while true {
                let data = source.availableData
                state.withLock {
                    if data.isEmpty { $0.ended = true } else { $0.text += String(decoding: data, as: UTF8.self) }
                }
                changed.signal()
                if data.isEmpty { return }
            }
        }
    }

    /// The bound port, or nil when the child exits (or `timeout` seconds pass) first.
    func waitForStart(timeout: Double) -> Int? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let (text, ended) = state.withLock { ($0.text, $0.ended) }
            if let port = Self.startedPort(in: text) { return port }
            if ended || changed.wait(timeout: .now() + deadline.timeIntervalSinceNow) == .timedOut { return nil }
        }
    }

    private static func startedPort(in text: String) -> Int? {
        for line in text.split(separator: "\n") {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String],
                object["message"] == "started", let listen = object["listen"].flatMap(ListenAddress.init)
            else { continue }
            return listen.port
        }
        return nil
    }
}

/// Sends a push request in two halves, 500 ms apart.
private final class SlowSender {
    let fd: Int32
    init(port: Int) throws { fd = try ClientSocket.connect(port: port) }

    func close() { _ = Foundation.close(fd) }

    func sendSlowly(afterFirstHalf: () -> Void) throws -> [UInt8] {
        let body = Fixture.message()
        let head =
            "POST /api/push/p/\(Base64URL.encode(SecureRandom.bytes(16))) HTTP/1.1\r\nHost: x\r\n"
            + "Connection: close\r\nTTL: 60\r\nContent-Encoding: aes128gcm\r\nContent-Length: \(body.count)\r\n\r\n"
        let bytes = Array(head.utf8) + body
        let half = bytes.count / 2
        ClientSocket.send(bytes[..<half], on: fd)
        afterFirstHalf()
        Thread.sleep(forTimeInterval: 1.5)
        ClientSocket.send(bytes[half...], on: fd)
        return ClientSocket.receiveAll(on: fd)
    }
}

private final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}
