import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

@Suite struct ActivityLogTests {
    @Test func everySavedChangeIsRecordedWithActorAndBeforeAndAfter() async throws {
        try await AdminHarness.with { admin in
            let account = AdminHarness.unique("acct")
            let actor = [("X-Actor", "alice@example.com")]
            _ = try await admin.call("POST", "/accounts", ["id": account, "plan": "lite"], headers: actor)
            _ = try await admin.call("PATCH", "/accounts/\(account)", ["plan": "plus"], headers: actor)
            let app = AdminHarness.unique("app")
            _ = try await admin.call("POST", "/accounts/\(account)/apps", ["id": app], headers: actor)
            _ = try await admin.call("PATCH", "/apps/\(app)", ["name": "Mail"], headers: actor)
            let credential = try await admin.insertCredential(account: account)
            _ = try await admin.call("PATCH", "/apps/\(app)/push", ["enabled": true, "credentialId": credential])
            let key = try await admin.call("POST", "/apps/\(app)/keys", [:])
            _ = try await admin.call("DELETE", "/apps/\(app)/keys/\(key.json["id"] as? Int ?? 0)")
            let user = AdminHarness.unique("user")
            _ = try await admin.call("PATCH", "/apps/\(app)/users/\(user)", ["authorized": true])
            _ = try await admin.call("DELETE", "/credentials/\(credential)?detach=true")
            // A request that changes nothing is not recorded, nor does it touch updatedAt.
            let appBefore = try await admin.call("GET", "/apps/\(app)").json["updatedAt"] as? String
            let accountBefore = try await admin.call("GET", "/accounts/\(account)").json["updatedAt"] as? String
            _ = try await admin.call("PATCH", "/apps/\(app)/push", ["enabled": true])
            _ = try await admin.call("PATCH", "/accounts/\(account)", ["plan": "plus"])
            #expect(appBefore != nil && accountBefore != nil)
            #expect(try await admin.call("GET", "/apps/\(app)").json["updatedAt"] as? String == appBefore)
            #expect(try await admin.call("GET", "/accounts/\(account)").json["updatedAt"] as? String == accountBefore)

            let log = try await admin.call("GET", "/accounts/\(account)/activity")
            #expect(log.status == 200)
            let entries = try #require(log.json["entries"] as? [[String: Any]])
            #expect(
                entries.map { $0["action"] as? String ?? "" }.reversed() == [
                    "account.create", "account.update", "app.create", "app.update", "app.push.update",
                    "app.key.create", "app.key.revoke", "app.user.update", "app.push.update", "credential.delete",
                ])
            let planChange = entries.first { $0["action"] as? String == "account.update" }
            #expect(planChange?["actor"] as? String == "alice@example.com")
            #expect(planChange?["subject"] as? String == "account:\(account)")
            #expect((planChange?["before"] as? [String: Any])?["plan"] as? String == "lite")
            #expect((planChange?["after"] as? [String: Any])?["plan"] as? String == "plus")
            #expect(planChange?["at"] is String)
            let push = entries.last { $0["action"] as? String == "app.push.update" }
            #expect(push?["actor"] as? String == "admin")
            #expect((push?["before"] as? [String: Any])?["pushEnabled"] as? Bool == false)
            // No credential before: written as null, as the API writes absent values.
            #expect((push?["before"] as? [String: Any])?["credentialId"] is NSNull)
            #expect((push?["after"] as? [String: Any])?["pushEnabled"] as? Bool == true)
            #expect((push?["after"] as? [String: Any])?["credentialId"] as? String == credential)
            // Never key material in the log.
            #expect(!log.text.contains("PRIVATE KEY"))
            #expect(!log.text.contains(key.json["key"] as? String ?? "pgk_"))

            let bySubject = try await admin.call("GET", "/activity?subject=app:\(app)&limit=2")
            #expect((bySubject.json["entries"] as? [[String: Any]])?.count == 2)
            // An app's subject also finds the changes under it (its users'), and only
            // its own: not those of an app whose id merely starts with it.
            let longerApp = app + "x"
            _ = try await admin.call("POST", "/accounts/\(account)/apps", ["id": longerApp])
            let underApp = try await admin.call("GET", "/activity?subject=app:\(app)")
            let subjects = (underApp.json["entries"] as? [[String: Any]] ?? []).map { $0["subject"] as? String ?? "" }
            #expect(subjects.contains("app:\(app)/user:\(user)"))
            #expect(subjects.allSatisfy { $0 == "app:\(app)" || $0.hasPrefix("app:\(app)/") })
            #expect(subjects.count == 7)
        }
    }

    /// The other changes: a user's creation, ban, unban and deletion, an app's and
    /// an account's deletion, each recorded under its subject.
    @Test func usersBansAndDeletionsAreRecorded() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            let app = try await admin.app(account: account)
            let user = AdminHarness.unique("user")
            #expect(try await admin.call("PUT", "/users/\(user)").status == 201)
            #expect(try await admin.call("PUT", "/users/\(user)/ban", ["reason": "spam"]).status == 200)
            #expect(try await admin.call("DELETE", "/users/\(user)/ban").status == 200)
            #expect(try await admin.call("DELETE", "/users/\(user)").status == 204)
            #expect(try await admin.call("DELETE", "/apps/\(app)").status == 204)
            #expect(try await admin.call("DELETE", "/accounts/\(account)").status == 204)
            func actions(_ subject: String) async throws -> [String] {
                let log = try await admin.call("GET", "/activity?subject=\(subject)")
                let entries = try #require(log.json["entries"] as? [[String: Any]], "\(log.text)")
                return entries.map { $0["action"] as? String ?? "" }.reversed()
            }
            #expect(try await actions("user:\(user)") == ["user.create", "user.ban", "user.unban", "user.delete"])
            #expect(try await actions("app:\(app)").last == "app.delete")
            #expect(try await actions("account:\(account)").last == "account.delete")
        }
    }
}
