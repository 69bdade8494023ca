import Foundation
import Shared
import TestSupport
import Testing

@testable import APNsSimulator

/// The simulator's certificate is trusted only through the CA file it wrote.
@Suite struct ClientTrustTests {
    @Test func aServerCertificateFromAnUnknownCAIsRefusedAndNothingIsSent() async throws {
        let trusted = try await Simulator.start()
        let other = try await Simulator.start()
        // Trusts `trusted`'s CA, talks to `other` (whose CA it does not know).
        let client = try trusted.client()
        let result = await client.result(
            Teams.notification(), credential: Teams.credential(), environment: other.environment)
        // And with only the system CAs, `trusted` itself is unknown too.
        let systemOnly = try trusted.client { $0.caFile = nil }
        let systemResult = await systemOnly.result(
            Teams.notification(), credential: Teams.credential(), environment: trusted.environment)
        for outcome in [result, systemResult] {
            guard case .failure(let error) = outcome else {
                Issue.record("expected untrustedServer, got \(outcome)")
                continue
            }
            #expect(error.code == .untrustedServer)
            #expect((error.underlying as? TLSError)?.code == .certificateVerification)
        }
        #expect(try await other.stats().accepted == 0)
        #expect(try await trusted.stats().accepted == 0)
        // The same client reaches the server its CA file vouches for.
        #expect(
            try await client.send(
                Teams.notification(), credential: Teams.credential(), environment: trusted.environment
            )
            .status == 200)
        await client.shutdown(deadline: .seconds(1))
        await systemOnly.shutdown(deadline: .seconds(1))
        await trusted.stop()
        await other.stop()
    }
}
