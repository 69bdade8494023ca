import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// Saving credentials and bundle ids, judged by the strict APNs simulator.
@Suite struct CredentialProbeTests {
    static func bundleID(_ label: String) -> String {
        "com.example.\(label).\(AdminHarness.unique("p").replacingOccurrences(of: "-", with: ""))"
    }

    let teamA: SimulatorProcess.Team
    let teamB: SimulatorProcess.Team

    init() throws {
        teamA = SimulatorProcess.Team(
            teamID: "TEAMAAAAA1", keyID: "KEYAAAAAA1", key: try P256PrivateKey.generate(),
            bundleIDs: [Self.bundleID("a1"), Self.bundleID("a2")])
        teamB = SimulatorProcess.Team(
            teamID: "TEAMBBBBB1", keyID: "KEYBBBBBB1", key: try P256PrivateKey.generate(),
            bundleIDs: [Self.bundleID("b1")])
    }

    /// The admin API probing the simulator as APNs production.
    func withAdmin(_ body: (AdminHarness) async throws -> Void) async throws {
        try await withAdminAndSimulator { admin, _ in try await body(admin) }
    }

    func withAdminAndSimulator(_ body: (AdminHarness, SimulatorProcess) async throws -> Void) async throws {
        try await SimulatorProcess.with(teams: [teamA, teamB]) { simulator in
            let (probeLogger, _) = TestEnvironment.capturingLogger("probe")
            let probe = APNsCredentialProbe(
                environment: simulator.environment, caFile: simulator.caFile, logger: probeLogger)
            try await AdminHarness.with(probe: probe) { admin in try await body(admin, simulator) }
        }
    }

    /// Connections the simulator has accepted so far (its control API's `/stats`).
    static func connectionsOpened(_ simulator: SimulatorProcess) async throws -> Int {
        let stats = try await RawHTTPClient(port: simulator.controlPort).request("GET", "/stats")
        let object = try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any]
        return try #require((object?["connections"] as? [String: Any])?["opened"] as? Int)
    }

    func add(_ admin: AdminHarness, account: String, keyID: String, teamID: String, key: P256PrivateKey) async throws
        -> AdminHarness.Answer
    {
        try await admin.call(
            "POST", "/accounts/\(account)/credentials",
            ["keyId": keyID, "teamId": teamID, "privateKey": key.pemRepresentation])
    }

    @Test func aWrongKeyTeamOrKeyIDIsRefusedWithApplesReasonAndNotSaved() async throws {
        try await withAdmin { admin in
            let account = try await admin.account()
            let cases: [(String, String, P256PrivateKey)] = [
                (teamA.keyID, teamA.teamID, try P256PrivateKey.generate()),  // wrong key
                (teamA.keyID, teamB.teamID, teamA.key),  // wrong team
                ("KEYZZZZZZ9", teamA.teamID, teamA.key),  // wrong key id
            ]
            for (keyID, teamID, key) in cases {
                let refused = try await add(admin, account: account, keyID: keyID, teamID: teamID, key: key)
                #expect(refused.status == 422)
                #expect(refused.errorCode == "credential_rejected")
                #expect(
                    refused.errorMessage
                        == "APNs rejected the credential (InvalidProviderToken); check the Key ID, Team ID and .p8")
            }
            let listed = try await admin.call("GET", "/accounts/\(account)/credentials")
            #expect((listed.json["credentials"] as? [Any])?.isEmpty == true)
        }
    }

    /// A credential a worker marked rejected is probed again: accepted, it is active
    /// again and its app's warning is gone; refused, 422 with Apple's reason and the
    /// credential flagged rejected.
    @Test func verifyReactivatesARejectedCredentialAPNsAcceptsAndRefusesOneItDoesNot() async throws {
        try await withAdmin { admin in
            let account = try await admin.account()
            let saved = try await add(admin, account: account, keyID: teamA.keyID, teamID: teamA.teamID, key: teamA.key)
            let id = try #require(saved.json["id"] as? String)
            let app = try await admin.app(account: account)
            #expect(try await admin.call("PATCH", "/apps/\(app)/push", ["credentialId": id]).status == 200)
            // What a worker does when APNs refuses a fresh token signed with it.
            try await admin.postgres.execute(
                """
                UPDATE push_credentials SET status = 'rejected', rejected_at = now(),
                       rejected_reason = 'APNs answered InvalidProviderToken' WHERE id = \(id)
                """)
            let verified = try await admin.call("POST", "/credentials/\(id)/verify")
            #expect(verified.status == 200)
            #expect(verified.json["status"] as? String == "active")
            #expect(verified.json["warning"] is NSNull)
            #expect(try await admin.call("GET", "/apps/\(app)").json["warning"] is NSNull)
            let activity = try await admin.call("GET", "/accounts/\(account)/activity")
            let actions = (activity.json["entries"] as? [[String: Any]])?.compactMap { $0["action"] as? String }
            #expect(actions?.contains("credential.create") == true)
            #expect(actions?.contains("credential.verify") == true)

            // A key id the simulator does not know (as a key revoked since): refused, and
            // the credential marked rejected as a worker's refused send would mark it.
            try await admin.postgres.execute("UPDATE push_credentials SET key_id = 'KEYZZZZZZ9' WHERE id = \(id)")
            let refused = try await admin.call("POST", "/credentials/\(id)/verify")
            #expect(refused.status == 422)
            #expect(refused.errorCode == "credential_rejected")
            let flagged = try await admin.call("GET", "/credentials/\(id)").json
            #expect(flagged["status"] as? String == "rejected")
            let warning = flagged["warning"] as? [String: Any]
            #expect(warning?["code"] as? String == "credential_rejected")
            #expect((warning?["message"] as? String)?.contains("APNs answered") == true)
            #expect(
                (try await admin.call("GET", "/apps/\(app)").json["warning"] as? [String: Any])?["code"] as? String
                    == "credential_rejected")
            let entries =
                try await admin.call("GET", "/accounts/\(account)/activity").json["entries"] as? [[String: Any]]
            #expect(entries?.filter { $0["action"] as? String == "credential.verify" }.count == 2)
            // Refused again: already flagged, nothing more recorded.
            #expect(try await admin.call("POST", "/credentials/\(id)/verify").status == 422)
            let again = try await admin.call("GET", "/accounts/\(account)/activity").json["entries"] as? [[String: Any]]
            #expect(again?.filter { $0["action"] as? String == "credential.verify" }.count == 2)
            #expect(try await admin.call("POST", "/credentials/nope/verify").status == 404)
        }
    }

    @Test func aGoodCredentialIsSavedAndItsKeyIsNowhereInOutputLogsOrPostgresPlaintext() async throws {
        try await withAdmin { admin in
            let account = try await admin.account()
            let pem = try teamA.key.pemRepresentation
            let saved = try await add(admin, account: account, keyID: teamA.keyID, teamID: teamA.teamID, key: teamA.key)
            #expect(saved.status == 201)
            let id = try #require(saved.json["id"] as? String)
            #expect(saved.json["keyId"] as? String == teamA.keyID)
            #expect(saved.json["teamId"] as? String == teamA.teamID)
            #expect(saved.json["status"] as? String == "active")
            #expect(saved.json["warning"] is NSNull)

            let scalar = try PEMScalar.privateScalar(of: pem)
            let pemBody = PEMScalar.base64Body(of: pem)
            var outputs = [saved.text]
            outputs.append(try await admin.call("GET", "/credentials/\(id)").text)
            outputs.append(try await admin.call("GET", "/accounts/\(account)/credentials").text)
            outputs.append(try await admin.call("GET", "/accounts/\(account)/activity").text)
            outputs += admin.logs.all
            for text in outputs {
                #expect(!text.contains("PRIVATE KEY"))
                #expect(!text.contains(pemBody))
                #expect(!text.contains(String(pemBody.prefix(40))))
                #expect(!text.contains(Base64URL.encode(scalar)))
            }
            let rows = try await admin.postgres.query(
                "SELECT sealed_key, row_to_json(c)::text AS whole FROM push_credentials c WHERE id = \(id)")
            let sealed = try rows[0].decode("sealed_key", as: [UInt8].self)
            #expect(sealed.firstRange(of: Array(pem.utf8)) == nil)
            #expect(sealed.firstRange(of: Array("PRIVATE".utf8)) == nil)
            #expect(sealed.firstRange(of: scalar) == nil)
            #expect(try !rows[0].decode("whole", as: String.self).contains("PRIVATE"))
            // The worker's reader opens it back to the same key.
            let reader = PushCredentialReader(
                postgres: admin.postgres, sealer: try PushCredentialSealer(key: admin.credentialKey))
            let opened = try await reader.credential(id: id)
            #expect(opened.privateKey.publicKey.uncompressedPoint == teamA.key.publicKey.uncompressedPoint)
        }
    }

    @Test func bundleIDsAreVerifiedAgainstTheCredentialsTeam() async throws {
        try await withAdminAndSimulator { admin, simulator in
            let account = try await admin.account()
            let saved = try await add(admin, account: account, keyID: teamA.keyID, teamID: teamA.teamID, key: teamA.key)
            let credential = try #require(saved.json["id"] as? String)
            let app = try await admin.app(account: account)

            let foreign = try await admin.call(
                "PATCH", "/apps/\(app)/push",
                ["enabled": true, "credentialId": credential, "bundleIds": [teamA.bundleIDs[0], teamB.bundleIDs[0]]])
            #expect(foreign.status == 422)
            #expect(foreign.errorCode == "bundle_id_not_in_team")
            #expect(
                foreign.errorMessage
                    == "bundle id \(teamB.bundleIDs[0]) does not belong to team \(teamA.teamID) of credential "
                    + "\(credential) (APNs: TopicDisallowed)")
            let unchanged = try await admin.call("GET", "/apps/\(app)")
            #expect(unchanged.json["bundleIds"] as? [String] == [])
            #expect(unchanged.json["pushEnabled"] as? Bool == false)

            let opened = try await Self.connectionsOpened(simulator)
            let own = try await admin.call(
                "PATCH", "/apps/\(app)/push",
                [
                    "enabled": true, "credentialId": credential,
                    "bundleIds": "\(teamA.bundleIDs[1])\n\(teamA.bundleIDs[0])\n",
                ])
            #expect(own.status == 200)
            #expect(own.json["bundleIds"] as? [String] == teamA.bundleIDs.sorted())
            // Both bundle ids probed over one connection (with one provider token).
            #expect(try await Self.connectionsOpened(simulator) == opened + 1)
            #expect(own.json["credentialId"] as? String == credential)

            // Site-wide unique: another app (even of the same account) gets 409 naming the owner.
            let other = try await admin.app(account: account)
            let taken = try await admin.call(
                "PATCH", "/apps/\(other)/push", ["credentialId": credential, "bundleIds": [teamA.bundleIDs[0]]])
            #expect(taken.status == 409)
            #expect(taken.errorMessage == "bundle id \(teamA.bundleIDs[0]) is already used by app \(app)")
        }
    }

    /// A bundle id's verification that finds the credential itself refused (its key
    /// revoked since) marks it rejected, as `verify` would: the warning shows on the
    /// credential and its apps at once, not only after a worker's send fails.
    @Test func aBundleIDSaveThatFindsTheCredentialRevokedFlagsIt() async throws {
        try await withAdminAndSimulator { admin, _ in
            let account = try await admin.account()
            let saved = try await add(admin, account: account, keyID: teamA.keyID, teamID: teamA.teamID, key: teamA.key)
            let credential = try #require(saved.json["id"] as? String)
            let app = try await admin.app(account: account)
            #expect(try await admin.call("PATCH", "/apps/\(app)/push", ["credentialId": credential]).status == 200)
            // A key id the simulator does not know: as a key revoked since it was saved.
            try await admin.postgres.execute(
                "UPDATE push_credentials SET key_id = 'KEYZZZZZZ9' WHERE id = \(credential)")
            let refused = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": [teamA.bundleIDs[0]]])
            #expect(refused.status == 422)
            #expect(refused.errorCode == "credential_rejected")
            let card = try await admin.call("GET", "/credentials/\(credential)").json
            #expect(card["status"] as? String == "rejected")
            #expect((card["warning"] as? [String: Any])?["code"] as? String == "credential_rejected")
            let shown = try await admin.call("GET", "/apps/\(app)").json
            #expect((shown["warning"] as? [String: Any])?["code"] as? String == "credential_rejected")
            #expect(shown["bundleIds"] as? [String] == [])
        }
    }

    /// Bundle ids are one id whatever their case: listing one in another case respells
    /// it (verified, as it is the APNs topic from now on) and keeps its subscriptions,
    /// where a removal would delete them.
    @Test func anIdentifierListedInAnotherCaseIsRespelledAndKeepsItsSubscriptions() async throws {
        let lower = Self.bundleID("case")
        let team = SimulatorProcess.Team(
            teamID: "TEAMCCCCC1", keyID: "KEYCCCCCC1", key: try P256PrivateKey.generate(),
            bundleIDs: [lower, lower.uppercased()])
        let invalidator = RecordingInvalidator()
        try await SimulatorProcess.with(teams: [team]) { simulator in
            let (probeLogger, _) = TestEnvironment.capturingLogger("probe")
            let probe = APNsCredentialProbe(
                environment: simulator.environment, caFile: simulator.caFile, logger: probeLogger)
            try await AdminHarness.with(probe: probe, invalidator: invalidator) { admin in
                let account = try await admin.account()
                let saved = try await add(
                    admin, account: account, keyID: team.keyID, teamID: team.teamID, key: team.key)
                let credential = try #require(saved.json["id"] as? String)
                let app = try await admin.app(account: account)
                let first = try await admin.call(
                    "PATCH", "/apps/\(app)/push", ["enabled": true, "credentialId": credential, "bundleIds": [lower]])
                #expect(first.status == 200)
                let subscription = try await admin.insertSubscription(app: app, topic: lower)

                // A spelling APNs does not take for the team is refused like a new id.
                let mixed = "Com" + lower.dropFirst(3)
                let refused = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": [mixed]])
                #expect(refused.status == 422)
                #expect(refused.errorCode == "bundle_id_not_in_team")

                let respelled = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": [lower.uppercased()]])
                #expect(respelled.status == 200)
                #expect(respelled.json["bundleIds"] as? [String] == [lower.uppercased()])
                let topics = try await admin.postgres.query(
                    "SELECT topic FROM subscriptions WHERE id = \(subscription)"
                )
                .map { try $0.decode("topic", as: String.self) }
                #expect(topics == [lower.uppercased()])
                #expect(invalidator.events.last == "changed \(subscription)")
                #expect(!invalidator.events.contains { $0.hasPrefix("deleted") })
            }
        }
    }

    @Test func pushctlAddsACredentialFromTheP8FileAndShowsApplesReasonWhenRefused() async throws {
        try await withAdmin { admin in
            let account = try await admin.account()
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent(AdminHarness.unique("p8"))
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let good = directory.appendingPathComponent("AuthKey_\(teamA.keyID).p8")
            try Data(try teamA.key.pemRepresentation.utf8).write(to: good)
            let wrong = directory.appendingPathComponent("AuthKey_wrong.p8")
            try Data(try P256PrivateKey.generate().pemRepresentation.utf8).write(to: wrong)
            let arguments = [
                "credential", "add", "--account", account, "--key-id", teamA.keyID, "--team-id", teamA.teamID,
            ]

            let refused = try await PushctlTests.pushctl(arguments + ["--p8", wrong.path], port: admin.port)
            #expect(refused.status == 1)
            #expect(
                refused.error
                    == "pushctl: APNs rejected the credential (InvalidProviderToken); check the Key ID, Team ID and .p8 "
                    + "(credential_rejected, HTTP 422)\n")
            let added = try await PushctlTests.pushctl(arguments + ["--p8", good.path], port: admin.port)
            #expect(added.status == 0)
            #expect(added.output.contains("keyId: \(teamA.keyID)\n"))
            #expect(added.output.contains("status: active\n"))
            #expect(!added.output.contains("PRIVATE"))
            let listed = try await PushctlTests.pushctl(["credential", "list", "--account", account], port: admin.port)
            #expect(listed.output.contains("\(teamA.keyID)  \(teamA.teamID)  active"))
        }
    }

    @Test func anUnreachableAPNsIs502AndNothingIsSaved() async throws {
        let (logger, _) = TestEnvironment.capturingLogger("probe")
        let probe = APNsCredentialProbe(
            environment: APNsEnvironment(name: "production", host: "127.0.0.1", port: 1), caFile: nil, logger: logger,
            requestTimeout: .seconds(3))
        try await AdminHarness.with(probe: probe) { admin in
            let account = try await admin.account()
            let answer = try await add(
                admin, account: account, keyID: teamA.keyID, teamID: teamA.teamID, key: teamA.key)
            #expect(answer.status == 502)
            #expect(answer.errorCode == "apns_unavailable")
            let listed = try await admin.call("GET", "/accounts/\(account)/credentials")
            #expect((listed.json["credentials"] as? [Any])?.isEmpty == true)
        }
    }
}

/// Reads a P-256 PKCS#8 PEM's private scalar, to check it is stored nowhere in the clear.
enum PEMScalar {
    static func base64Body(of pem: String) -> String {
        pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    }

    /// The 32 bytes after ECPrivateKey's version (`02 01 01`) and `04 20`.
    static func privateScalar(of pem: String) throws -> [UInt8] {
        let der = [UInt8](Data(base64Encoded: base64Body(of: pem)) ?? Data())
        guard let marker = der.firstRange(of: [0x02, 0x01, 0x01, 0x04, 0x20]), marker.upperBound + 32 <= der.count
        else { throw SimulatorProcess.Failure(description: "no P-256 private scalar in the PEM") }
        return Array(der[marker.upperBound..<marker.upperBound + 32])
    }
}
