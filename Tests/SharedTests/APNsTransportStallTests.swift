import Foundation
import Testing
@testable import Shared

/// Reproduces a stall below the APNs client, in the shared server-side stack
/// (TLSStream accepted socket + HTTP2Connection, server role): on roughly 1 in 300
/// fresh connections the first request is fully written by the client (nghttp2's
/// outbound queue empty, the stream's send window reduced by the body, nothing
/// pending in the TLS stream) yet the server's HTTP2Connection never reports it
/// (`streamDidFinish` is not called; PINGs on the same connection do not unstick it).
/// Disabled until the transport is fixed; run it with
/// `swift test --filter APNsTransportStallTests` after removing `.disabled`.
@Suite struct APNsTransportStallTests {
    @Test(.disabled("server-side TLS/HTTP2 stall on ~1 in 300 fresh connections; see the doc comment"))
    func everyFirstRequestOnAFreshConnectionReachesTheServer() async throws {
        let credential = APNsCredential(id: "c", teamID: "TEAM123456", keyID: "KEY1234567", privateKey: try .generate())
        let server = try await APNsTestServer.start(initialMaxStreams: 100, raisedMaxStreams: nil)
        defer { server.stop() }
        var outcomes: [String: Int] = [:]
        for _ in 0..<150 {
            let client = try APNsClient(
                configuration: APNsClient.Configuration(requestTimeout: .seconds(4), caFile: server.certificates.caFile),
                tokens: InMemoryProviderTokenStore(), logger: Logger(component: "test", minimumLevel: .error))
            let environment = server.environment
            let results = await withTaskGroup(of: String.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let notification = APNsNotification(deviceToken: "abcd", topic: "t", apnsID: UUID(), payload: [1])
                        do {
                            return "\(try await client.send(notification, credential: credential, environment: environment).status)"
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                var counts: [String: Int] = [:]
                for await result in group { counts[result, default: 0] += 1 }
                return counts
            }
            outcomes.merge(results, uniquingKeysWith: +)
            await client.shutdown()
        }
        let stats = try await server.stats()
        #expect(outcomes == ["200": 3000], "server saw \(stats.delivered) of 3000 over \(stats.connectionsAccepted) connections")
    }

}
