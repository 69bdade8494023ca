import Foundation
import Testing

@testable import Shared

/// Regression test: a server-side TLS handshake that completed inside
/// `TLSStream(acceptedSocket:)` lost the first requests of ~1 in 300 fresh
/// connections (see `HTTP2ConnectionTests.firstRequestsOnFreshConnectionsAllReachTheServer`).
@Suite struct APNsTransportStallTests {
    @Test
    func everyFirstRequestOnAFreshConnectionReachesTheServer() async throws {
        let credential = APNsCredential(id: "c", teamID: "TEAM123456", keyID: "KEY1234567", privateKey: try .generate())
        let server = try await APNsTestServer.start(initialMaxStreams: 100, raisedMaxStreams: nil)
        defer { server.stop() }
        var outcomes: [String: Int] = [:]
        for _ in 0..<60 {
            let client = try APNsClient(
                configuration: APNsClient.Configuration(
                    requestTimeout: .seconds(4), caFile: server.certificates.caFile),
                tokens: InMemoryProviderTokenStore(), logger: Logger(component: "test", minimumLevel: .error))
            let environment = server.environment
            let results = await withTaskGroup(of: String.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let notification = APNsNotification(
                            deviceToken: "abcd", topic: "t", apnsID: UUID(), payload: [1])
                        do {
                            return
                                "\(try await client.send(notification, credential: credential, environment: environment).status)"
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
        #expect(
            outcomes == ["200": 1200],
            "server saw \(stats.delivered) of 1200 over \(stats.connectionsAccepted) connections")
    }

}
