import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// What happens to saved credentials (the save itself, which asks APNs, is in
/// `CredentialProbeTests` against the simulator).
@Suite struct CredentialLifecycleTests {
    @Test func deleteIsRefusedWhileAnAppUsesItUnlessDetaching() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            let app = try await admin.app(account: account)
            let credential = try await admin.insertCredential(account: account)
            let attached = try await admin.call("PATCH", "/apps/\(app)/push", ["credentialId": credential])
            #expect(attached.status == 200)
            #expect(attached.json["credentialId"] as? String == credential)
            let listed = try await admin.call("GET", "/accounts/\(account)/credentials")
            let first = (listed.json["credentials"] as? [[String: Any]])?.first
            #expect(first?["apps"] as? [String] == [app])

            let refused = try await admin.call("DELETE", "/credentials/\(credential)")
            #expect(refused.status == 409)
            #expect(refused.errorCode == "credential_in_use")
            #expect(refused.errorMessage?.contains("used by app \(app)") == true)

            let deleted = try await admin.call("DELETE", "/credentials/\(credential)?detach=true")
            #expect(deleted.status == 204)
            let after = try await admin.call("GET", "/apps/\(app)")
            #expect(after.json["credentialId"] is NSNull)
            #expect(try await admin.call("GET", "/credentials/\(credential)").status == 404)
        }
    }

    @Test func aRejectedCredentialShowsTheWarningWithItsTimeOnTheCardAndEveryAppUsingIt() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            let (first, second) = (try await admin.app(account: account), try await admin.app(account: account))
            let credential = try await admin.insertCredential(account: account)
            for app in [first, second] {
                #expect(try await admin.call("PATCH", "/apps/\(app)/push", ["credentialId": credential]).status == 200)
            }
            // What a worker does on 403 InvalidProviderToken.
            try await admin.postgres.execute(
                """
                UPDATE push_credentials SET status = 'rejected', rejected_at = '2026-11-02T03:04:05Z',
                       rejected_reason = 'InvalidProviderToken' WHERE id = \(credential)
                """)
            let card = try await admin.call("GET", "/credentials/\(credential)")
            #expect(card.json["status"] as? String == "rejected")
            let warning = card.json["warning"] as? [String: Any]
            #expect(warning?["code"] as? String == "credential_rejected")
            #expect(warning?["at"] as? String == "2026-11-02T03:04:05.000Z")
            #expect((warning?["message"] as? String)?.contains("InvalidProviderToken") == true)
            for app in [first, second] {
                let shown = try await admin.call("GET", "/apps/\(app)")
                #expect((shown.json["warning"] as? [String: Any])?["code"] as? String == "credential_rejected")
                #expect((shown.json["warning"] as? [String: Any])?["at"] as? String == "2026-11-02T03:04:05.000Z")
            }
        }
    }

    @Test func theWorkersReaderOpensTheSealedKeyOnlyForItsOwnRow() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            let credential = try await admin.insertCredential(account: account, teamID: "TEAM000042")
            let reader = PushCredentialReader(
                postgres: admin.postgres, sealer: try PushCredentialSealer(key: admin.credentialKey))
            let opened = try await reader.credential(id: credential)
            #expect(opened.teamID == "TEAM000042")
            #expect(opened.status == .active)
            #expect(!opened.description.contains("PRIVATE"))
            // The sealed key moved onto another credential's row does not open there.
            let other = try await admin.insertCredential(account: account)
            try await admin.postgres.execute(
                """
                UPDATE push_credentials SET sealed_key = (SELECT sealed_key FROM push_credentials WHERE id = \(credential))
                WHERE id = \(other)
                """)
            await #expect(throws: PushCredentialReader.Failure.self) { try await reader.credential(id: other) }
        }
    }

    /// A key Apple limits to one environment (the probe asks production) is refused
    /// saying so, not with the hint for a wrong Key ID, Team ID or .p8.
    @Test func aKeyLimitedToOneEnvironmentIsRefusedSayingSo() {
        let limited = CredentialsController.rejected(reason: "BadEnvironmentKeyInToken")
        #expect(limited.status == 422 && limited.code == "credential_rejected")
        #expect(
            limited.message
                == "APNs rejected the credential (BadEnvironmentKeyInToken); the key is limited to one APNs environment; create one for Sandbox & Production"
        )
        #expect(CredentialsController.rejected(reason: "InvalidProviderToken").message.hasSuffix("Team ID and .p8"))
    }

    /// The workers store Apple's answer as the reason ("APNs answered …"); the warning
    /// shown on the card and the apps reads once, without "APNs rejected … (APNs answered …)".
    @Test func theRejectedWarningQuotesTheWorkersReasonOnce() {
        let warning = PushWarning.rejected(reason: "APNs answered InvalidProviderToken", at: nil)
        #expect(
            warning.message
                == "this credential was rejected (APNs answered InvalidProviderToken); sends fail until it is verified again (once Apple accepts it) or replaced"
        )
        #expect(PushWarning.rejected(reason: nil, at: nil).message.contains("(InvalidProviderToken)"))
    }
}
