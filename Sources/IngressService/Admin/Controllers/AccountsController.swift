import Foundation
import Shared

/// Accounts and their plans; the monthly quota per account.
struct AccountsController: Sendable {
    struct CreateRequest: Decodable {
        var id: String?
        var name: String?
        var plan: PlanName?
    }

    struct UpdateRequest: Decodable {
        var name: String?
        var plan: PlanName?
    }

    struct AccountList: Encodable {
        var accounts: [Account]
    }

    let dependencies: AdminDependencies
    private let accounts = AccountsRepository()
    private let apps = AppsRepository()

    var routes: [AdminRoute] {
        [
            AdminRoute("POST", "/accounts", create),
            AdminRoute("GET", "/accounts", list),
            AdminRoute("GET", "/accounts/:id", show),
            AdminRoute("PATCH", "/accounts/:id", update),
            AdminRoute("DELETE", "/accounts/:id", delete),
            AdminRoute("GET", "/accounts/:id/usage", usage),
            AdminRoute("GET", "/accounts/:id/daily-counts", dailyCounts),
        ]
    }

    func create(_ request: AdminRequest) async throws -> HTTPResponse {
        let body = try request.decode(CreateRequest.self)
        let id = try body.id.map { try AdminValidation.id($0, "id") } ?? AdminValidation.newID("acct_")
        let name = try AdminValidation.name(body.name)
        let account = try await dependencies.postgres.withTransaction { connection in
            let account = try await accounts.insert(id, name: name, plan: body.plan ?? .lite, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: id, actor: request.actor, action: "account.create", subject: "account:\(id)",
                before: nil, after: account)
            return account
        }
        // A counter left by a deleted account of this id (its deletion could not drop
        // it): the new account has no apps yet, so nothing counts under it now.
        await forgetQuota(of: id)
        return AdminResponse.created(account)
    }

    func list(_ request: AdminRequest) async throws -> HTTPResponse {
        let limit = try request.integer("limit", default: 100, range: 1...1000)
        let after = try request.nonEmptyQuery("after")
        let found = try await dependencies.postgres.withConnection {
            try await accounts.list(limit: limit, after: after, on: $0)
        }
        return AdminResponse.ok(AccountList(accounts: found))
    }

    func show(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        return AdminResponse.ok(
            try await dependencies.postgres.withConnection { try await accounts.require(id, on: $0) })
    }

    /// A plan change takes effect at once: the account's cache entry is invalidated,
    /// so the ingress applies the new quota to the next push.
    func update(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        let body = try request.decode(UpdateRequest.self)
        let name = try body.name.map { try AdminValidation.name($0) }
        let (before, after) = try await dependencies.postgres.withTransaction { connection in
            let before = try await accounts.require(id, forUpdate: true, on: connection)
            let (newName, newPlan) = (name ?? before.name, body.plan ?? before.plan)
            // An unchanged account keeps its updatedAt.
            guard newName != before.name || newPlan != before.plan else { return (before, before) }
            let after = try await accounts.update(id, name: newName, plan: newPlan, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: id, actor: request.actor, action: "account.update",
                subject: "account:\(id)", before: Snapshot(before), after: Snapshot(after))
            return (before, after)
        }
        // Also when the plan named is the one saved: a repeat of a change whose answer
        // was lost (its commit done, its invalidation not) must not leave caches stale.
        if before.plan != after.plan || body.plan != nil {
            await dependencies.invalidate("account") { try await dependencies.invalidator.accountChanged(id) }
        }
        return AdminResponse.ok(after)
    }

    /// Deletes the account with its credentials, apps, identifiers and subscriptions.
    func delete(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        let (removedApps, subscriptions) = try await dependencies.postgres.withTransaction { connection in
            let account = try await accounts.require(id, forUpdate: true, on: connection)
            let removedApps = try await apps.list(accountID: id, on: connection)
            var subscriptions: [String] = []
            for app in removedApps { subscriptions += try await apps.subscriptionIDs(appID: app.id, on: connection) }
            try await accounts.delete(id, on: connection)
            try await dependencies.activity.record(
                on: connection, accountID: id, actor: request.actor, action: "account.delete", subject: "account:\(id)",
                before: Snapshot(account), after: nil)
            return (removedApps, subscriptions)
        }
        await dependencies.invalidate("account") {
            try await dependencies.invalidator.accountChanged(id)
            for app in removedApps { try await dependencies.invalidator.appChanged(app.id, topics: app.bundleIds) }
            try await dependencies.invalidator.subscriptionsDeleted(subscriptions)
        }
        await forgetQuota(of: id)
        return AdminResponse.noContent
    }

    /// Drops the account id's monthly quota counters, once: at deletion (a hard delete
    /// leaves nothing behind) and at creation (what a failed drop left). Not retried
    /// later, when an account of that id might already be counting again.
    private func forgetQuota(of id: String) async {
        do {
            try await dependencies.quota.forget(accountID: id, months: Self.quotaMonths(around: dependencies.now()))
        } catch {
            dependencies.logger.warning(
                "cannot drop the quota counters of a deleted account id; they expire within 40 days",
                metadata: ["account": id, "error": "\(error)"])
        }
    }

    /// The quota months a push of an account may have been counted in at `now`: this
    /// one, the one before (its counters outlive it, `HotPathScript.quotaKeyLifetimeSeconds`)
    /// and the next (a replica whose clock runs ahead at a month's end).
    static func quotaMonths(around now: Date) -> [String] {
        let start = monthStart(of: now)
        let next = utcCalendar.date(byAdding: .month, value: 1, to: start)!
        let previous = start.addingTimeInterval(-1)
        return [RedisKeys.quotaMonth(previous), RedisKeys.quotaMonth(now), RedisKeys.quotaMonth(next)]
    }

    /// The quota's calendar: Gregorian months in UTC.
    private static let utcCalendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// The first instant of `date`'s UTC month.
    private static func monthStart(of date: Date) -> Date {
        utcCalendar.date(from: utcCalendar.dateComponents([.year, .month], from: date))!
    }

    func usage(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        let now = dependencies.now()
        let start = Self.monthStart(of: now)
        let parts = Self.utcCalendar.dateComponents([.year, .month], from: now)
        let (account, sent) = try await dependencies.postgres.withConnection { connection in
            let account = try await accounts.require(id, on: connection)
            return (account, try await accounts.sentSince(start, accountID: id, on: connection))
        }
        let counted = try await dependencies.quota.used(accountID: id, month: RedisKeys.quotaMonth(now))
        let used = counted ?? sent
        let limit = account.plan.monthlyLimit
        return AdminResponse.ok(
            AccountUsage(
                accountId: id, plan: account.plan, month: String(format: "%04d-%02d", parts.year!, parts.month!),
                used: used, sent: sent, limit: limit, remaining: limit.map { max($0 - used, 0) }))
    }

    /// The most days one request reads: a year, leap day included.
    static let dailyCountsMaximumDays = 366

    func dailyCounts(_ request: AdminRequest) async throws -> HTTPResponse {
        let id = request.parameter("id")
        let now = dependencies.now()
        let from = try Self.day(request.nonEmptyQuery("from"), "from") ?? Self.monthStart(of: now)
        let to = try Self.day(request.nonEmptyQuery("to"), "to") ?? now
        let app = try request.nonEmptyQuery("app")
        let days = Int((to.timeIntervalSince(from) / 86_400).rounded(.down)) + 1
        guard days >= 1 else { throw AdminError.invalid("query parameter from must not be after to") }
        guard days <= Self.dailyCountsMaximumDays else {
            throw AdminError.invalid("at most \(Self.dailyCountsMaximumDays) days can be read at once")
        }
        let (fromText, toText) = (UTCDay.text(of: from), UTCDay.text(of: to))
        let counts = try await dependencies.postgres.withConnection { connection in
            _ = try await accounts.require(id, on: connection)
            return try await accounts.dailyCounts(
                accountID: id, from: fromText, to: toText, appID: app, on: connection)
        }
        return AdminResponse.ok(DailyCountList(accountId: id, from: fromText, to: toText, days: counts))
    }

    /// A `yyyy-MM-dd` query parameter as its UTC midnight (nil when absent).
    private static func day(_ text: String?, _ name: String) throws(AdminError) -> Date? {
        guard let text else { return nil }
        guard let day = UTCDay.start(of: text) else {
            throw .invalid("query parameter \(name) must be a day as YYYY-MM-DD")
        }
        return day
    }

    /// What the activity log keeps of an account.
    struct Snapshot: Encodable {
        var name: String
        var plan: PlanName
        init(_ account: Account) {
            name = account.name
            plan = account.plan
        }
    }
}
