import Foundation
import Shared

/// Push credentials (APNs `.p8` keys) of an account: probed before saving, sealed at
/// rest, never shown again.
struct CredentialsController: Sendable {
    struct CreateRequest: Decodable {
        var keyId: String
        var teamId: String
        /// The full `.p8` contents (PKCS#8 PEM).
        var privateKey: String
    }

    struct CredentialList: Encodable {
        var credentials: [Credential]
    }

    /// What the activity log keeps of a credential: never the key.
    struct Snapshot: Encodable {
        var keyId: String
        var teamId: String
    }

    /// The topic of a credential-only probe. No team owns it, so a valid token gets
    /// TopicDisallowed (the token passed) and a bad one InvalidProviderToken.
    static let probeTopic = "net.pushgate.credential-probe"

    let dependencies: AdminDependencies
    private let accounts = AccountsRepository()
    private let credentials = CredentialsRepository()
    private let apps = AppsRepository()

    var routes: [AdminRoute] {
        [
            AdminRoute("POST", "/accounts/:id/credentials", create),
            AdminRoute("GET", "/accounts/:id/credentials", list),
            AdminRoute("GET", "/credentials/:id", show),
            AdminRoute("DELETE", "/credentials/:id", delete),
            AdminRoute("POST", "/credentials/:id/verify", verify),
        ]
    }

    /// Probes APNs production with the key, then seals and saves it. A key APNs
    /// refuses is not saved: 422 `credential_rejected` with Apple's reason.
    func create(_ request: AdminRequest) async throws -> HTTPResponse {
        let accountID = request.parameter("id")
        let body = try request.decode(CreateRequest.self)
        let keyID = try AdminValidation.appleID(body.keyId, "keyId")
        let teamID = try AdminValidation.appleID(body.teamId, "teamId")
        let privateKey: P256PrivateKey
        do {
            privateKey = try P256PrivateKey(pemRepresentation: body.privateKey)
        } catch {
            throw AdminError.unprocessable(
                "invalid_private_key", "privateKey must be the full .p8 file: a P-256 private key in PEM")
        }
        _ = try await dependencies.postgres.withConnection { try await accounts.require(accountID, on: $0) }

        switch try await probe(teamID: teamID, keyID: keyID, privateKey: privateKey, topic: Self.probeTopic) {
        case .credentialRejected(let reason):
            throw Self.rejected(reason: reason)
        case .accepted, .topicRefused:
            break
        }

        let id = AdminValidation.newID("cred_")
        let sealed = try dependencies.sealer.seal(privateKey, credentialID: id)
        let credential = try await dependencies.postgres.withTransaction { connection in
            _ = try await accounts.require(accountID, forUpdate: true, on: connection)
            try await credentials.insert(
                id: id, accountID: accountID, teamID: teamID, keyID: keyID, sealedKey: sealed, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: accountID, actor: request.actor, action: "credential.create",
                subject: "credential:\(id)", before: nil, after: Snapshot(keyId: keyID, teamId: teamID))
            return try await credentials.require(id, on: connection)
        }
        await dependencies.invalidate("credential") { try await dependencies.invalidator.credentialChanged(id) }
        dependencies.logger.info(
            "push credential saved",
            metadata: ["credential": id, "account": accountID, "key_id": keyID, "team_id": teamID])
        return AdminResponse.created(credential)
    }

    func list(_ request: AdminRequest) async throws -> HTTPResponse {
        let accountID = request.parameter("id")
        let found = try await dependencies.postgres.withConnection { connection in
            _ = try await accounts.require(accountID, on: connection)
            return try await credentials.list(accountID: accountID, on: connection)
        }
        return AdminResponse.ok(CredentialList(credentials: found))
    }

    func show(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        return AdminResponse.ok(
            try await dependencies.postgres.withConnection { try await credentials.require(id, on: $0) })
    }

    /// Probes a saved credential again with its sealed key. Accepted: one a worker
    /// marked rejected (APNs refused a token signed with it) is active again, and its
    /// apps send again (workers read it again within a minute). The way back after
    /// a revocation that was undone, or a rejection that was not the key's fault.
    /// Refused: 422 `credential_rejected` with Apple's reason, and an active credential
    /// is marked rejected as a worker's refused send would mark it (the warning shows,
    /// its apps' pushes fail at once), recorded in the activity log.
    func verify(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        let stored: StoredPushCredential
        do {
            stored = try await dependencies.credentialReader.credential(id: id)
        } catch let failure as PushCredentialReader.Failure where failure.code == .notFound {
            throw AdminError.notFound("credential", id)
        } catch let failure as PushCredentialReader.Failure {
            throw AdminError.unprocessable("credential_unusable", failure.description)
        }
        switch try await probe(
            teamID: stored.teamID, keyID: stored.keyID, privateKey: stored.privateKey, topic: Self.probeTopic)
        {
        case .credentialRejected(let reason):
            try await settle(id, rejection: reason, actor: request.actor)
            throw Self.rejected(reason: reason)
        case .accepted, .topicRefused:
            return AdminResponse.ok(try await settle(id, rejection: nil, actor: request.actor))
        }
    }

    /// 422 `credential_rejected` with Apple's reason and what to check for it.
    static func rejected(reason: String) -> AdminError {
        // A key created for one APNs environment only: the service needs both (a
        // subscription's `sandbox` picks the environment per device).
        let hint =
            reason == "BadEnvironmentKeyInToken"
            ? "the key is limited to one APNs environment; create one for Sandbox & Production"
            : "check the Key ID, Team ID and .p8"
        return AdminError.unprocessable("credential_rejected", "APNs rejected the credential (\(reason)); \(hint)")
    }

    /// Gives the credential the status a verification found: active, or rejected with
    /// APNs's `rejection` in the workers' form ("APNs answered …"). A change is
    /// recorded; its apps' cached settings are dropped either way. Returns the
    /// credential as it is now.
    @discardableResult
    func settle(_ id: String, rejection: String?, actor: String) async throws -> Credential {
        let status = rejection == nil ? "active" : "rejected"
        let (credential, usingApps) = try await dependencies.postgres.withTransaction { connection in
            guard let apps = try await credentials.lockAndListApps(id, on: connection) else {
                throw AdminError.notFound("credential", id)
            }
            let before = try await credentials.require(id, on: connection)
            // Unchanged (already settled so): nothing recorded, but its apps' entries are
            // dropped again, in case the change's own invalidation was lost with its answer.
            guard before.status != status else { return (before, apps) }
            if let rejection {
                try await credentials.markRejected(id, reason: "APNs answered \(rejection)", on: connection)
            } else {
                try await credentials.markActive(id, on: connection)
            }
            try await dependencies.activity.record(
                on: connection, accountID: before.accountId, actor: actor, action: "credential.verify",
                subject: "credential:\(id)", before: ["status": before.status], after: ["status": status])
            return (try await credentials.require(id, on: connection), apps)
        }
        if !usingApps.isEmpty {
            await dependencies.invalidate("credential") {
                for app in usingApps { try await dependencies.invalidator.appChanged(app, topics: []) }
            }
        }
        return credential
    }

    /// Refused (409 `credential_in_use`) while apps use the credential, unless
    /// `?detach=true`: then those apps are left without one (recorded per app).
    func delete(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        let detach = try request.flag("detach")
        let detached = try await dependencies.postgres.withTransaction { connection in
            let credential = try await credentials.require(id, on: connection)
            guard let users = try await credentials.lockAndListApps(id, on: connection) else {
                throw AdminError.notFound("credential", id)
            }
            if !users.isEmpty && !detach {
                throw AdminError.conflict(
                    "credential_in_use",
                    "credential \(id) is used by app\(users.count == 1 ? "" : "s") \(users.joined(separator: ", ")); "
                        + "choose another credential for them or delete with detach")
            }
            var detached: [App] = []
            for appID in users { detached.append(try await apps.require(appID, on: connection)) }
            try await credentials.detach(id, on: connection)
            for appID in users {
                try await dependencies.activity.record(
                    on: connection, accountID: credential.accountId, actor: request.actor, action: "app.push.update",
                    subject: "app:\(appID)", before: ["credentialId": id], after: ["credentialId": String?.none])
            }
            try await credentials.delete(id, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: credential.accountId, actor: request.actor, action: "credential.delete",
                subject: "credential:\(id)", before: Snapshot(keyId: credential.keyId, teamId: credential.teamId),
                after: nil)
            return detached
        }
        await dependencies.invalidate("credential") {
            try await dependencies.invalidator.credentialChanged(id)
            for app in detached { try await dependencies.invalidator.appChanged(app.id, topics: app.bundleIds) }
        }
        return AdminResponse.noContent
    }

    func probe(teamID: String, keyID: String, privateKey: P256PrivateKey, topic: String) async throws(AdminError)
        -> CredentialProbeResult
    {
        let results = try await probe(teamID: teamID, keyID: keyID, privateKey: privateKey, topics: [topic])
        guard let result = results.first else { throw AdminError.apnsUnavailable("APNs gave no answer") }
        return result
    }

    /// One result per topic, in order (`CredentialProbe`).
    func probe(teamID: String, keyID: String, privateKey: P256PrivateKey, topics: [String]) async throws(AdminError)
        -> [CredentialProbeResult]
    {
        do {
            return try await dependencies.probe.probe(
                teamID: teamID, keyID: keyID, privateKey: privateKey, topics: topics)
        } catch {
            dependencies.logger.warning("APNs probe failed", metadata: ["key_id": keyID, "error": error.message])
            throw AdminError.apnsUnavailable("APNs could not be asked to check the credential: \(error.message)")
        }
    }
}
