import Foundation
import Shared
import TestSupport
import Testing

/// Starts the built `ingress-service` executable, sends SIGTERM while a request is
/// in flight, and expects the request answered and exit status 0. Serialized with
/// the other disruptive suites because it spawns a process.
@Suite(.serialized) struct DisruptiveIngressShutdownTests {
    @Test func sigtermStopsAcceptingFinishesInFlightRequestsAndExitsZero() async throws {
        let binary = TestEnvironment.repositoryRoot.appendingPathComponent(".build/debug/ingress-service").path
        try #require(FileManager.default.isExecutableFile(atPath: binary))
        let port = Int.random(in: 20_000...40_000)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.environment = ProcessInfo.processInfo.environment.merging([
            "DATABASE_URL": TestEnvironment.databaseURL, "REDIS_URL": TestEnvironment.redisURL,
            "CREDENTIAL_KEY": Data(SecureRandom.bytes(32)).base64EncodedString(),
            "PUBLIC_BASE_URL": "https://push.example.test", "INGRESS_LISTEN": "127.0.0.1:\(port)",
            "LOG_LEVEL": "warning",
        ]) { _, new in new }
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }

        let client = RawHTTPClient(port: port)
        var up = false
        for _ in 0..<100 where !up {
            up = (try? await client.request("GET", "/healthz"))?.status == 200
            if !up { try await Task.sleep(for: .milliseconds(100)) }
        }
        try #require(up)

        // A request whose body is still arriving when SIGTERM comes.
        let slow = Task { () -> Int in
            let raw = try await onThread { () -> [UInt8] in
                let connection = try SlowSender(port: port)
                defer { connection.close() }
                return try connection.sendSlowly()
            }
            return try RawHTTPClient.parse(raw).status
        }
        try await Task.sleep(for: .milliseconds(200))
        kill(process.processIdentifier, SIGTERM)
        let status = try await slow.value
        #expect(status == 404, "answered \(status)")  // answered (unknown subscription), not dropped
        try await onThread { process.waitUntilExit() }
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
    }
}

/// Sends a push request in two halves, 500 ms apart.
private final class SlowSender {
    let fd: Int32
    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw RawHTTPClient.Failure(description: "connect failed") }
    }

    func close() { _ = Foundation.close(fd) }

    func sendSlowly() throws -> [UInt8] {
        let body = Fixture.message()
        let head =
            "POST /api/push/p/\(Base64URL.encode(SecureRandom.bytes(16))) HTTP/1.1\r\nHost: x\r\n"
            + "Connection: close\r\nTTL: 60\r\nContent-Encoding: aes128gcm\r\nContent-Length: \(body.count)\r\n\r\n"
        let bytes = Array(head.utf8) + body
        let half = bytes.count / 2
        _ = bytes[..<half].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        Thread.sleep(forTimeInterval: 0.5)
        _ = bytes[half...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return received
    }
}
