import Foundation
import Shared

/// App API keys: created here (shown once, stored as SHA-256), listed, revoked.
struct APIKeysController: Sendable {
    struct CreateRequest: Decodable {
        var name: String?
        /// Default `["push:send"]`.
        var scopes: [AppAPIScope]?
    }

    struct KeyList: Encodable {
        var keys: [APIKey]
    }

    /// What the activity log keeps of a key: never the key or its hash.
    struct Snapshot: Encodable {
        var id: Int64
        var name: String
        var scopes: [AppAPIScope]
        var revoked: Bool
    }

    let dependencies: AdminDependencies
    private let apps = AppsRepository()
    private let keys = APIKeysRepository()

    var routes: [AdminRoute] {
        [
            AdminRoute("POST", "/apps/:id/keys", create),
            AdminRoute("GET", "/apps/:id/keys", list),
            AdminRoute("DELETE", "/apps/:id/keys/:key", revoke),
        ]
    }

    func create(_ request: AdminRequest) async throws -> HTTPResponse {
        let appID = request.parameter("id")
        let body = try request.decode(CreateRequest.self)
        let name = try AdminValidation.name(body.name)
        let scopes = body.scopes ?? [.pushSend]
        guard !scopes.isEmpty else { throw AdminError.invalid("scopes must name at least one scope") }
        if let unknown = scopes.first(where: { !$0.isKnown }) {
            throw AdminError.invalid(
                "unknown scope \(unknown.rawValue.prefix(64)); known: \(AppAPIScope.known.map(\.rawValue).joined(separator: ", "))"
            )
        }
        let secret = AppAPIKey.generate()
        var key = try await dependencies.postgres.withTransaction { connection in
            let app = try await apps.lock(appID, on: connection)
            let key = try await keys.insert(
                appID: appID, name: name, keyHash: AppAPIKey.hash(of: secret),
                scopes: Array(Set(scopes)).sorted {
                    $0.rawValue < $1.rawValue
                }, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: app.accountId, actor: request.actor, action: "app.key.create",
                subject: "app:\(appID)", before: nil,
                after: Snapshot(id: key.id, name: key.name, scopes: key.scopes, revoked: false))
            return key
        }
        key.key = secret
        return AdminResponse.created(key)
    }

    func list(_ request: AdminRequest) async throws -> HTTPResponse {
        let appID = request.parameter("id")
        let found = try await dependencies.postgres.withConnection { connection in
            _ = try await apps.require(appID, on: connection)
            return try await keys.list(appID: appID, on: connection)
        }
        return AdminResponse.ok(KeyList(keys: found))
    }

    func revoke(_ request: AdminRequest) async throws -> HTTPResponse {
        let appID = request.parameter("id")
        guard let keyID = Int64(request.parameter("key")) else {
            throw AdminError.notFound("API key", request.parameter("key"))
        }
        let (key, hash) = try await dependencies.postgres.withTransaction { connection in
            let app = try await apps.lock(appID, on: connection)
            guard let before = try await keys.find(keyID, appID: appID, on: connection) else {
                throw AdminError.notFound("API key", "\(keyID) of app \(appID)")
            }
            guard let after = try await keys.revoke(keyID, appID: appID, on: connection) else {
                throw AdminError.notFound("API key", "\(keyID) of app \(appID)")
            }
            if before.revokedAt == nil {
                try await dependencies.activity.record(
                    on: connection, accountID: app.accountId, actor: request.actor, action: "app.key.revoke",
                    subject: "app:\(appID)",
                    before: Snapshot(id: keyID, name: before.name, scopes: before.scopes, revoked: false),
                    after: Snapshot(id: keyID, name: after.name, scopes: after.scopes, revoked: true))
            }
            return (after, try await keys.hash(keyID, on: connection))
        }
        await dependencies.invalidate("api key") { try await dependencies.invalidator.apiKeyRevoked(keyHash: hash) }
        return AdminResponse.ok(key)
    }
}
