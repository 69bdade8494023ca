import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

@Suite struct AccountsAndPlansTests {
    @Test func createShowAndDuplicateConflict() async throws {
        try await AdminHarness.with { admin in
            let id = AdminHarness.unique("acct")
            let created = try await admin.call("POST", "/accounts", ["id": id, "name": "Example Ltd", "plan": "pro"])
            #expect(created.status == 201)
            #expect(created.json["id"] as? String == id)
            #expect(created.json["plan"] as? String == "pro")
            #expect(created.json["name"] as? String == "Example Ltd")
            let shown = try await admin.call("GET", "/accounts/\(id)")
            #expect(shown.status == 200)
            #expect(shown.json["plan"] as? String == "pro")
            let again = try await admin.call("POST", "/accounts", ["id": id])
            #expect(again.status == 409)
            #expect(again.errorCode == "account_exists")
            let generated = try await admin.call("POST", "/accounts", [:])
            #expect(generated.status == 201)
            #expect((generated.json["id"] as? String)?.hasPrefix("acct_") == true)
            #expect(generated.json["plan"] as? String == "lite")
        }
    }

    @Test func usageIsSentThisUTCMonthAgainstThePlanLimitAndAnUpgradeLiftsIt() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account(plan: "plus")
            let app = try await admin.app(account: account)
            // The worker adds daily counts; last month's do not count.
            try await admin.postgres.execute(
                """
                INSERT INTO daily_counts (account_id, app_id, day, sent, failed) VALUES
                  (\(account), \(app), (now() AT TIME ZONE 'UTC')::date, 49990, 7),
                  (\(account), \(app), (date_trunc('month', now() AT TIME ZONE 'UTC') - interval '1 day')::date, 1000, 0)
                """)
            let plus = try await admin.call("GET", "/accounts/\(account)/usage")
            #expect(plus.status == 200)
            #expect(plus.json["used"] as? Int == 49990)
            #expect(plus.json["limit"] as? Int == 50000)
            #expect(plus.json["remaining"] as? Int == 10)
            #expect(plus.json["plan"] as? String == "plus")

            let upgraded = try await admin.call("PATCH", "/accounts/\(account)", ["plan": "pro"])
            #expect(upgraded.status == 200)
            let pro = try await admin.call("GET", "/accounts/\(account)/usage")
            #expect(pro.json["limit"] as? Int == 500000)
            #expect(pro.json["remaining"] as? Int == 500000 - 49990)

            _ = try await admin.call("PATCH", "/accounts/\(account)", ["plan": "enterprise"])
            let enterprise = try await admin.call("GET", "/accounts/\(account)/usage")
            #expect(enterprise.json["limit"] is NSNull)
            #expect(enterprise.json["remaining"] is NSNull)

            _ = try await admin.call("PATCH", "/accounts/\(account)", ["plan": "lite"])
            let lite = try await admin.call("GET", "/accounts/\(account)/usage")
            #expect(lite.json["limit"] as? Int == 0)
            #expect(lite.json["remaining"] as? Int == 0)
        }
    }

    @Test func dailyCountsListARangeByDayAndAppAndRefuseWhatIsNotADay() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account(plan: "plus")
            // Named in the order the answer lists them (by id, byte-wise).
            let apps = [try await admin.app(account: account), try await admin.app(account: account)].sorted()
            let (first, second) = (apps[0], apps[1])
            let other = try await admin.account(plan: "plus")
            try await admin.postgres.execute(
                """
                INSERT INTO daily_counts (account_id, app_id, day, sent, failed, gone) VALUES
                  (\(account), \(second), '2026-02-28', 5, 1, 0),
                  (\(account), \(first), '2026-02-28', 3, 0, 2),
                  (\(account), \(first), '2026-02-01', 1, 0, 0),
                  (\(account), \(first), '2026-03-01', 9, 9, 9),
                  (\(account), \(first), '2026-01-31', 9, 9, 9),
                  (\(other), \(first), '2026-02-10', 9, 9, 9),
                  (\(account), \(first), (now() AT TIME ZONE 'UTC')::date, 4, 0, 0)
                """)
            let february = try await admin.call(
                "GET", "/accounts/\(account)/daily-counts?from=2026-02-01&to=2026-02-28")
            #expect(february.status == 200)
            #expect(february.json["accountId"] as? String == account)
            #expect(february.json["from"] as? String == "2026-02-01")
            #expect(february.json["to"] as? String == "2026-02-28")
            let days = try #require(february.json["days"] as? [[String: Any]])
            #expect(days.map { $0["day"] as? String } == ["2026-02-01", "2026-02-28", "2026-02-28"])
            #expect(days.map { $0["appId"] as? String } == [first, first, second].map { Optional($0) })
            #expect(
                days.map { [$0["sent"], $0["failed"], $0["gone"]] as? [Int] } == [[1, 0, 0], [3, 0, 2], [5, 1, 0]])

            let oneApp = try await admin.call(
                "GET", "/accounts/\(account)/daily-counts?from=2026-02-01&to=2026-02-28&app=\(second)")
            #expect((oneApp.json["days"] as? [[String: Any]])?.map { $0["sent"] as? Int } == [5])

            // By default: this UTC month so far.
            let current = try await admin.call("GET", "/accounts/\(account)/daily-counts")
            #expect(current.status == 200)
            #expect((current.json["days"] as? [[String: Any]])?.map { $0["sent"] as? Int } == [4])
            #expect((current.json["from"] as? String)?.hasSuffix("-01") == true)

            for query in [
                "from=2026-02-30", "to=2026-13-01", "from=2026-2-01", "from=26-02-01", "from=%2B2026-02-0",
                "from=2026-03-02&to=2026-03-01", "from=2024-01-01&to=2025-01-01", "from=2999-01-01",
            ] {
                let refused = try await admin.call("GET", "/accounts/\(account)/daily-counts?\(query)")
                #expect(refused.status == 400, "\(query)")
                #expect(refused.errorCode == "invalid_request", "\(query)")
            }
            // A leap year's 366 days are one request.
            let year = try await admin.call("GET", "/accounts/\(account)/daily-counts?from=2024-01-01&to=2024-12-31")
            #expect(year.status == 200)
            let missing = try await admin.call("GET", "/accounts/no-such-\(account)/daily-counts")
            #expect(missing.status == 404)
        }
    }

    @Test func aPlanChangeInvalidatesTheAccountCacheAtOnce() async throws {
        let invalidator = RecordingInvalidator()
        try await AdminHarness.with(invalidator: invalidator) { admin in
            let account = try await admin.account(plan: "plus")
            _ = try await admin.call("PATCH", "/accounts/\(account)", ["name": "renamed"])
            #expect(invalidator.events.isEmpty)
            _ = try await admin.call("PATCH", "/accounts/\(account)", ["plan": "pro"])
            #expect(invalidator.events == ["account \(account)"])
            // Repeated (its answer lost, say, after the commit and before the
            // invalidation): nothing changes or is recorded, but the cache is dropped again.
            _ = try await admin.call("PATCH", "/accounts/\(account)", ["plan": "pro"])
            #expect(invalidator.events == ["account \(account)", "account \(account)"])
        }
    }

    @Test func deletingAnAccountDeletesItsAppsAndSubscriptions() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            let app = try await admin.app(account: account)
            let bundle = "com.example.\(AdminHarness.unique("del").replacingOccurrences(of: "-", with: ""))"
            try await admin.insertIdentifier(bundle, app: app)
            let subscription = try await admin.insertSubscription(app: app, topic: bundle)
            let deleted = try await admin.call("DELETE", "/accounts/\(account)")
            #expect(deleted.status == 204)
            #expect(try await !admin.subscriptionExists(subscription))
            #expect(try await admin.call("GET", "/apps/\(app)").status == 404)
        }
    }
}
