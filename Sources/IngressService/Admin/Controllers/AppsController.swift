import Foundation
import Shared

/// Apps and their push settings: enabled, credential, bundle ids (APNs topics).
struct AppsController: Sendable {
    struct CreateRequest: Decodable {
        var id: String?
        var name: String?
    }

    struct UpdateRequest: Decodable {
        var name: String?
    }

    struct AppList: Encodable {
        var apps: [App]
    }

    /// What the activity log keeps of an app's push settings.
    struct PushSnapshot: Encodable, Equatable {
        var pushEnabled: Bool
        var credentialId: String?
        var bundleIds: [String]

        init(_ app: App) {
            pushEnabled = app.pushEnabled
            credentialId = app.credentialId
            bundleIds = app.bundleIds
        }

        private enum CodingKeys: String, CodingKey { case pushEnabled, credentialId, bundleIds }

        /// `credentialId` as `null` when there is none, as the API writes absent values
        /// (the synthesized encoder would leave the key out).
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(pushEnabled, forKey: .pushEnabled)
            try container.encode(credentialId, forKey: .credentialId)
            try container.encode(bundleIds, forKey: .bundleIds)
        }
    }

    let dependencies: AdminDependencies
    private let accounts = AccountsRepository()
    private let apps = AppsRepository()
    private let credentials = CredentialsRepository()

    var routes: [AdminRoute] {
        [
            AdminRoute("POST", "/accounts/:id/apps", create),
            AdminRoute("GET", "/accounts/:id/apps", list),
            AdminRoute("GET", "/apps/:id", show),
            AdminRoute("PATCH", "/apps/:id", update),
            AdminRoute("DELETE", "/apps/:id", delete),
            AdminRoute("PATCH", "/apps/:id/push", updatePush),
            AdminRoute("PUT", "/apps/:id/push", updatePush),
        ]
    }

    func create(_ request: AdminRequest) async throws -> HTTPResponse {
        let accountID = request.parameter("id")
        let body = try request.decode(CreateRequest.self)
        let id = try body.id.map { try AdminValidation.id($0, "id") } ?? AdminValidation.newID("app_")
        let name = try AdminValidation.name(body.name)
        let app = try await dependencies.postgres.withTransaction { connection in
            _ = try await accounts.require(accountID, forUpdate: true, on: connection)
            try await apps.insert(id, accountID: accountID, name: name, on: connection)
            let app = try await apps.require(id, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: accountID, actor: request.actor, action: "app.create", subject: "app:\(id)",
                before: nil, after: app)
            return app
        }
        return AdminResponse.created(app)
    }

    func list(_ request: AdminRequest) async throws -> HTTPResponse {
        let accountID = request.parameter("id")
        let found = try await dependencies.postgres.withConnection { connection in
            _ = try await accounts.require(accountID, on: connection)
            return try await apps.list(accountID: accountID, on: connection)
        }
        return AdminResponse.ok(AppList(apps: found))
    }

    func show(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        return AdminResponse.ok(try await dependencies.postgres.withConnection { try await apps.require(id, on: $0) })
    }

    func update(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        let body = try request.decode(UpdateRequest.self)
        let name = try AdminValidation.name(body.name)
        let app = try await dependencies.postgres.withTransaction { connection in
            let before = try await apps.lock(id, on: connection)
            guard body.name != nil, before.name != name else { return before }
            try await apps.rename(id, name: name, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: before.accountId, actor: request.actor, action: "app.update",
                subject: "app:\(id)", before: ["name": before.name], after: ["name": name])
            return try await apps.require(id, on: connection)
        }
        return AdminResponse.ok(app)
    }

    /// Deletes the app with its identifiers, subscriptions and API keys.
    func delete(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        let (app, subscriptions) = try await dependencies.postgres.withTransaction { connection in
            let app = try await apps.lock(id, on: connection)
            let subscriptions = try await apps.subscriptionIDs(appID: id, on: connection)
            try await apps.delete(id, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: app.accountId, actor: request.actor, action: "app.delete",
                subject: "app:\(id)", before: app, after: nil)
            return (app, subscriptions)
        }
        await dependencies.invalidate("app") {
            try await dependencies.invalidator.appChanged(id, topics: app.bundleIds)
            try await dependencies.invalidator.subscriptionsDeleted(subscriptions)
        }
        return AdminResponse.noContent
    }

    /// Saves push settings, the console's "Push" section:
    /// - enabling needs a plan with push (422 `plan_without_push`);
    /// - the credential must be one of the account's (422 `credential_not_in_account`);
    /// - bundle ids are unique site-wide, ignoring case (409 `bundle_id_taken`, naming
    ///   the id and the app that has it) and each new one is verified with an APNs probe
    ///   against the credential's team (422 `bundle_id_not_in_team` with Apple's reason);
    ///   with a new credential every bundle id is verified again; `credentialId: null`
    ///   detaches it and keeps the bundle ids (only adding or respelling one needs a
    ///   credential);
    /// - removing a bundle id deletes its device subscriptions; listing one in another
    ///   case respells it (verified like a new one), its subscriptions kept.
    /// The change and its activity record commit together; caches are invalidated after.
    ///
    /// APNs is probed before the transaction, not inside it: a slow or unreachable APNs
    /// must not hold the app's row lock and a Postgres connection for its timeouts. The
    /// transaction decides again under the lock; if what it must verify is no longer
    /// what was verified (the settings changed meanwhile), the save is refused with 409
    /// `concurrent_update`, to be retried.
    func updatePush(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        let body = try request.decode(PushSettingsRequest.self)
        let requestedBundleIDs = try body.bundleIds.map(Self.normalize)

        let planned = try await dependencies.postgres.withConnection { connection in
            try await decidePush(id, body, requestedBundleIDs, locking: false, on: connection)
        }
        if !planned.toVerify.isEmpty, let credential = planned.credential {
            try await verify(planned.toVerify, with: credential, actor: request.actor)
        }
        let (before, after, deleted, renamed) = try await dependencies.postgres.withTransaction { connection in
            let change = try await decidePush(id, body, requestedBundleIDs, locking: true, on: connection)
            guard change.credential?.id == planned.credential?.id,
                Set(change.toVerify).isSubset(of: planned.toVerify)
            else {
                throw AdminError.conflict(
                    "concurrent_update", "app \(id)'s push settings changed while they were verified; try again")
            }
            let before = change.before
            // An unchanged app keeps its updatedAt.
            if change.enabled != before.pushEnabled || change.credential?.id != before.credentialId
                || !change.removed.isEmpty || !change.renamed.isEmpty || !change.added.isEmpty
            {
                try await apps.setPush(id, enabled: change.enabled, credentialID: change.credential?.id, on: connection)
            }
            let deleted = try await apps.removeIdentifiers(change.removed, appID: id, on: connection)
            let renamed = try await apps.renameIdentifiers(change.renamed, appID: id, on: connection)
            try await apps.addIdentifiers(change.added, appID: id, on: connection)
            let after = try await apps.require(id, on: connection)
            if PushSnapshot(before) != PushSnapshot(after) {
                try await dependencies.activity.record(
                    on: connection, accountID: change.accountID, actor: request.actor, action: "app.push.update",
                    subject: "app:\(id)", before: PushSnapshot(before), after: PushSnapshot(after))
            }
            return (before, after, deleted, renamed)
        }
        // Also when nothing changed: a repeat of a change whose answer was lost (its
        // commit done, its invalidation not) must not leave the app's entries stale.
        let topics = Array(Set(before.bundleIds).union(after.bundleIds)).sorted()
        await dependencies.invalidate("app") {
            try await dependencies.invalidator.appChanged(id, topics: topics)
            if !deleted.isEmpty { try await dependencies.invalidator.subscriptionsDeleted(deleted) }
            if !renamed.isEmpty { try await dependencies.invalidator.subscriptionsChanged(renamed) }
        }
        if !deleted.isEmpty {
            dependencies.logger.info(
                "subscriptions deleted with their bundle ids", metadata: ["app": id, "count": "\(deleted.count)"])
        }
        return AdminResponse.ok(after)
    }

    /// What a push settings change does to the app as it is now, checked (all but the
    /// APNs probes): the bundle ids to verify, add, remove and respell (the same id in
    /// another case: kept with its subscriptions).
    private struct PushChange {
        let before: App
        let accountID: String
        let enabled: Bool
        let credential: Credential?
        let added: [String]
        let removed: [String]
        let renamed: [BundleIDRename]
        let toVerify: [String]
    }

    /// Checks `body` against the app as it is on `connection` (its row locked when
    /// `locking`) and says what the change does.
    private func decidePush(
        _ id: String, _ body: PushSettingsRequest, _ requestedBundleIDs: [String]?, locking: Bool,
        on connection: PostgresConnection
    ) async throws -> PushChange {
        let before = try await locking ? apps.lock(id, on: connection) : apps.require(id, on: connection)
        let account = try await accounts.require(before.accountId, on: connection)
        let enabled = body.enabled ?? before.pushEnabled
        let credentialID = body.credentialId ?? before.credentialId
        let bundleIDs = requestedBundleIDs ?? before.bundleIds

        // Turning push on needs a plan with push; restating it (a console sending its
        // whole form) after a downgrade does not, so ids and credential stay editable.
        if body.enabled == true && !before.pushEnabled && !account.plan.allowsPush {
            throw AdminError.unprocessable(
                "plan_without_push",
                "account \(account.id) is on the \(account.plan.rawValue) plan, which has no push; upgrade it first"
            )
        }
        var credential: Credential?
        if let credentialID {
            credential = try await credentials.find(credentialID, on: connection)
            guard let found = credential, found.accountId == account.id else {
                throw AdminError.unprocessable(
                    "credential_not_in_account", "credential \(credentialID) is not one of account \(account.id)'s")
            }
        }
        // Bundle ids are one id whatever their case (`normalize`, the unique index):
        // one listed in another case is respelled, not removed and added, which would
        // delete its subscriptions.
        let existing = Dictionary(
            before.bundleIds.map { ($0.lowercased(), $0) }, uniquingKeysWith: { first, _ in first })
        let requested = Set(bundleIDs.map { $0.lowercased() })
        let added = bundleIDs.filter { existing[$0.lowercased()] == nil }
        let removed = before.bundleIds.filter { !requested.contains($0.lowercased()) }
        let renamed = bundleIDs.compactMap { bundleID in
            existing[bundleID.lowercased()].flatMap { $0 == bundleID ? nil : BundleIDRename(from: $0, to: bundleID) }
        }

        if let conflict = try await apps.conflicts(added, excluding: id, on: connection).first {
            throw AdminError.conflict(
                "bundle_id_taken", "bundle id \(conflict.bundleID) is already used by app \(conflict.appID)")
        }
        // A new credential must reach every bundle id; detaching one leaves nothing to
        // verify the kept ids with (sends fail credential_missing until one is chosen).
        // A respelled id is verified too: it is the APNs topic as sent from now on.
        let toVerify =
            credentialID != before.credentialId && credentialID != nil ? bundleIDs : added + renamed.map(\.to)
        if !toVerify.isEmpty && credential == nil {
            throw AdminError.unprocessable(
                "credential_required", "choose a push credential so the bundle ids can be verified")
        }
        return PushChange(
            before: before, accountID: account.id, enabled: enabled, credential: credential, added: added,
            removed: removed, renamed: renamed, toVerify: toVerify)
    }

    /// Probes APNs once per bundle id with the credential's key, over one connection.
    /// A credential APNs rejects is marked so, as `POST /credentials/{id}/verify` would
    /// (its warning shows, its apps' pushes fail at once), before the save is refused.
    private func verify(_ bundleIDs: [String], with credential: Credential, actor: String) async throws {
        let stored: StoredPushCredential
        do {
            stored = try await dependencies.credentialReader.credential(id: credential.id)
        } catch let error as PushCredentialReader.Failure {
            throw AdminError.unprocessable("credential_unusable", error.description)
        }
        let results = try await CredentialsController(dependencies: dependencies).probe(
            teamID: stored.teamID, keyID: stored.keyID, privateKey: stored.privateKey, topics: bundleIDs)
        for (bundleID, result) in zip(bundleIDs, results) {
            switch result {
            case .accepted:
                continue
            case .topicRefused(let reason):
                throw AdminError.unprocessable(
                    "bundle_id_not_in_team",
                    "bundle id \(bundleID) does not belong to team \(stored.teamID) of credential \(credential.id) "
                        + "(APNs: \(reason))")
            case .credentialRejected(let reason):
                try await CredentialsController(dependencies: dependencies).settle(
                    credential.id, rejection: reason, actor: actor)
                throw AdminError.unprocessable(
                    "credential_rejected", "APNs rejected credential \(credential.id) (\(reason)); replace it first")
            }
        }
    }

    /// Trims each id, checks it (a blank one too) and refuses one listed twice (ignoring case).
    static func normalize(_ values: [String]) throws(AdminError) -> [String] {
        var result: [String] = []
        var seen: Set<String> = []
        for value in values {
            // A blank one is refused, not skipped: the list replaces the app's, and
            // every bundle id left out loses its devices.
            let bundleID = value.trimmingCharacters(in: .whitespacesAndNewlines)
            guard AdminValidation.isBundleID(bundleID) else {
                throw .invalid(
                    "bundle id \"\(bundleID.prefix(160))\" is not valid: letters, digits, dots and hyphens, at most 155"
                )
            }
            guard seen.insert(bundleID.lowercased()).inserted else {
                throw .invalid("bundle id \(bundleID) is listed twice")
            }
            result.append(bundleID)
        }
        return result
    }
}
