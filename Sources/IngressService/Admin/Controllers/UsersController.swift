import Foundation
import Shared

/// Platform users as the identity platform reports them: upserted, banned site-wide,
/// and per app authorized, unsubscribed or disabled.
struct UsersController: Sendable {
    struct BanRequest: Decodable {
        var reason: String?
    }

    struct AppStateRequest: Decodable {
        var authorized: Bool?
        var unsubscribed: Bool?
        var disabled: Bool?
        var disabledReason: String?
    }

    let dependencies: AdminDependencies
    private let users = UsersRepository()
    private let apps = AppsRepository()

    var routes: [AdminRoute] {
        [
            AdminRoute("PUT", "/users/:id", upsert),
            AdminRoute("GET", "/users/:id", show),
            AdminRoute("DELETE", "/users/:id", delete),
            AdminRoute("PUT", "/users/:id/ban", ban),
            AdminRoute("DELETE", "/users/:id/ban", unban),
            AdminRoute("GET", "/apps/:app/users/:id", showInApp),
            AdminRoute("PATCH", "/apps/:app/users/:id", updateInApp),
            AdminRoute("PUT", "/apps/:app/users/:id", updateInApp),
        ]
    }

    /// 201 when the user is new, 200 when it existed.
    func upsert(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = try AdminValidation.id(request.parameter("id"), "user id")
        let (created, user) = try await dependencies.postgres.withTransaction { connection in
            let created = try await users.upsert(id, on: connection)
            if created {
                try await dependencies.activity.record(
                    on: connection, accountID: nil, actor: request.actor, action: "user.create", subject: "user:\(id)",
                    before: nil, after: ["id": id])
            }
            return (created, try await users.require(id, on: connection))
        }
        return created ? AdminResponse.created(user) : AdminResponse.ok(user)
    }

    func show(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        return AdminResponse.ok(try await dependencies.postgres.withConnection { try await users.require(id, on: $0) })
    }

    func delete(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        try await dependencies.postgres.withTransaction { connection in
            let user = try await users.require(id, on: connection)
            try await users.delete(id, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: nil, actor: request.actor, action: "user.delete", subject: "user:\(id)",
                before: user, after: nil)
        }
        await dependencies.invalidate("user") { try await dependencies.invalidator.userChanged(id, appID: nil) }
        return AdminResponse.noContent
    }

    func ban(_ request: AdminRequest) async throws -> HTTPResponse {
        let body = try request.decode(BanRequest.self)
        let reason = try AdminValidation.reason(body.reason)
        return try await changeBan(request, action: "user.ban") { id, _, connection in
            try await users.ban(id, reason: reason, on: connection)
            return true
        }
    }

    func unban(_ request: AdminRequest) async throws -> HTTPResponse {
        try await changeBan(request, action: "user.unban") { id, before, connection in
            guard before.banned != nil else { return false }
            try await users.unban(id, on: connection)
            return true
        }
    }

    /// Runs `change` on the user (false: nothing to change), records it in the
    /// activity log and invalidates the user's cache entry.
    private func changeBan(
        _ request: AdminRequest, action: String,
        _ change: @escaping @Sendable (String, User, PostgresConnection) async throws -> Bool
    ) async throws -> HTTPResponse {
        let id = request.parameter("id")
        let user = try await dependencies.postgres.withTransaction { connection in
            let before = try await users.require(id, on: connection)
            guard try await change(id, before, connection) else { return before }
            let after = try await users.require(id, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: nil, actor: request.actor, action: action, subject: "user:\(id)",
                before: ["banned": before.banned], after: ["banned": after.banned])
            return after
        }
        await dependencies.invalidate("user") { try await dependencies.invalidator.userChanged(id, appID: nil) }
        return AdminResponse.ok(user)
    }

    func showInApp(_ request: AdminRequest) async throws -> HTTPResponse {
        let (appID, userID) = (request.parameter("app"), request.parameter("id"))
        let state = try await dependencies.postgres.withConnection { connection in
            _ = try await apps.require(appID, on: connection)
            _ = try await users.require(userID, on: connection)
            return try await users.state(userID: userID, appID: appID, on: connection)
        }
        return AdminResponse.ok(state)
    }

    /// Sets any of authorized / unsubscribed / disabled (creating the user if new);
    /// `disabledReason` goes with `disabled: true`, or alone for a user disabled already.
    /// Revoking the authorization leaves the user's subscriptions bound (sends to them
    /// are skipped until it is granted again).
    func updateInApp(_ request: AdminRequest) async throws -> HTTPResponse {
        let appID = request.parameter("app")
        let userID = try AdminValidation.id(request.parameter("id"), "user id")
        let body = try request.decode(AppStateRequest.self)
        let reason = try AdminValidation.reason(body.disabledReason)
        let after = try await dependencies.postgres.withTransaction { connection in
            let app = try await apps.lock(appID, on: connection)
            try await users.upsert(userID, on: connection)
            let before = try await users.state(userID: userID, appID: appID, on: connection)
            if let authorized = body.authorized, authorized != before.authorized {
                try await users.setAuthorized(authorized, userID: userID, appID: appID, on: connection)
            }
            if let unsubscribed = body.unsubscribed, unsubscribed != before.unsubscribed {
                try await users.setUnsubscribed(unsubscribed, userID: userID, appID: appID, on: connection)
            }
            // A reason is a disabled user's: given alone, it replaces the reason of one
            // disabled already; with anything but `disabled: true` it would be dropped.
            if reason != nil, body.disabled == false || (body.disabled == nil && !before.disabled) {
                throw AdminError.invalid("disabledReason is for a disabled user: send it with disabled: true")
            }
            if let disabled = body.disabled ?? (reason != nil ? true : nil) {
                // Absent is unchanged: `disabled: true` alone keeps a disabled user's reason.
                let kept = disabled ? reason ?? (before.disabled ? before.disabledReason : nil) : nil
                if disabled != before.disabled || kept != before.disabledReason {
                    try await users.setDisabled(disabled, reason: kept, userID: userID, appID: appID, on: connection)
                }
            }
            let after = try await users.state(userID: userID, appID: appID, on: connection)
            if after != before {
                try await dependencies.activity.record(
                    on: connection, accountID: app.accountId, actor: request.actor, action: "app.user.update",
                    subject: "app:\(appID)/user:\(userID)", before: before, after: after)
            }
            return after
        }
        await dependencies.invalidate("user") { try await dependencies.invalidator.userChanged(userID, appID: appID) }
        return AdminResponse.ok(after)
    }
}
