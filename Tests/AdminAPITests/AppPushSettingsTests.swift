import Foundation
import Shared
import Synchronization
import TestSupport
import Testing

@testable import IngressService

@Suite struct AppPushSettingsTests {
    static func bundleID(_ label: String) -> String {
        "com.example.\(label).\(AdminHarness.unique("b").replacingOccurrences(of: "-", with: ""))"
    }

    @Test func liteAccountCannotEnablePushUntilUpgraded() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account(plan: "lite")
            let app = try await admin.app(account: account)
            let refused = try await admin.call("PATCH", "/apps/\(app)/push", ["enabled": true])
            #expect(refused.status == 422)
            #expect(refused.errorCode == "plan_without_push")
            #expect(try await admin.call("GET", "/apps/\(app)").json["pushEnabled"] as? Bool == false)

            _ = try await admin.call("PATCH", "/accounts/\(account)", ["plan": "plus"])
            let enabled = try await admin.call("PATCH", "/apps/\(app)/push", ["enabled": true])
            #expect(enabled.status == 200)
            #expect(enabled.json["pushEnabled"] as? Bool == true)
            // On, but no credential yet: the app shows why sends would fail.
            #expect((enabled.json["warning"] as? [String: Any])?["code"] as? String == "credential_missing")

            // Downgraded to Lite: still on (it resumes with an upgrade), and it says why
            // its pushes are refused meanwhile.
            _ = try await admin.call("PATCH", "/accounts/\(account)", ["plan": "lite"])
            let downgraded = try await admin.call("GET", "/apps/\(app)").json
            #expect(downgraded["pushEnabled"] as? Bool == true)
            #expect((downgraded["warning"] as? [String: Any])?["code"] as? String == "plan_without_push")
            let listed = try await admin.call("GET", "/accounts/\(account)/apps").json["apps"] as? [[String: Any]]
            #expect((listed?.first?["warning"] as? [String: Any])?["code"] as? String == "plan_without_push")
            // Restating `enabled: true` (a console sending its whole form) turns nothing
            // on: not refused, so the rest of such a form can be saved.
            let restated = try await admin.call("PATCH", "/apps/\(app)/push", ["enabled": true])
            #expect(restated.status == 200, "\(restated.text)")
            #expect(restated.json["pushEnabled"] as? Bool == true)
        }
    }

    @Test func aBundleIDOfAnotherAppIs409NamingItEvenInAnotherCase() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            let owner = try await admin.app(account: account)
            let taken = Self.bundleID("Taken")
            try await admin.insertIdentifier(taken, app: owner)
            let other = try await admin.app(account: try await admin.account())
            let conflict = try await admin.call(
                "PATCH", "/apps/\(other)/push", ["bundleIds": ["com.example.free", taken.lowercased()]])
            #expect(conflict.status == 409)
            #expect(conflict.errorCode == "bundle_id_taken")
            #expect(conflict.errorMessage == "bundle id \(taken) is already used by app \(owner)")
            #expect(try await admin.call("GET", "/apps/\(other)").json["bundleIds"] as? [String] == [])
        }
    }

    @Test func bundleIDsNeedACredentialOfTheSameAccount() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            let app = try await admin.app(account: account)
            let none = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": [Self.bundleID("x")]])
            #expect(none.status == 422)
            #expect(none.errorCode == "credential_required")
            let foreign = try await admin.insertCredential(account: try await admin.account())
            let wrongAccount = try await admin.call("PATCH", "/apps/\(app)/push", ["credentialId": foreign])
            #expect(wrongAccount.status == 422)
            #expect(wrongAccount.errorCode == "credential_not_in_account")
        }
    }

    /// `"credentialId": null` detaches (as README documents): nothing is left to
    /// verify the kept bundle ids with, so APNs is not asked and the save succeeds.
    @Test func aNullCredentialDetachesItAndKeepsTheBundleIDs() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            let app = try await admin.app(account: account)
            let bundle = Self.bundleID("detach")
            try await admin.insertIdentifier(bundle, app: app)
            let subscription = try await admin.insertSubscription(app: app, topic: bundle)
            let credential = try await admin.insertCredential(account: account)
            try await admin.postgres.execute(
                "UPDATE apps SET push_enabled = true, credential_id = \(credential) WHERE id = \(app)")

            let detached = try await admin.call("PATCH", "/apps/\(app)/push", ["credentialId": NSNull()])
            #expect(detached.status == 200)
            #expect(detached.json["credentialId"] is NSNull)
            #expect(detached.json["bundleIds"] as? [String] == [bundle])
            #expect((detached.json["warning"] as? [String: Any])?["code"] as? String == "credential_missing")
            #expect(try await admin.subscriptionExists(subscription))
            // Adding a bundle id still needs a credential to verify it with.
            let added = try await admin.call(
                "PATCH", "/apps/\(app)/push", ["bundleIds": [bundle, Self.bundleID("added")]])
            #expect(added.status == 422)
            #expect(added.errorCode == "credential_required")
        }
    }

    @Test func bundleIDsAreCheckedAndOneListedTwiceIsRefused() async throws {
        try await AdminHarness.with { admin in
            let app = try await admin.app(account: try await admin.account())
            let invalid = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": ["com.example/app"]])
            #expect(invalid.status == 400)
            #expect(invalid.errorMessage?.hasPrefix("bundle id \"com.example/app\" is not valid") == true)
            let twice = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": "com.a.b\ncom.A.b"])
            #expect(twice.status == 400)
            #expect(twice.errorMessage == "bundle id com.A.b is listed twice")
            // An array holds one id per element: lines in one are not split (a trailing
            // line break, as read from a file, is trimmed like spaces).
            let lines = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": ["com.a.b\ncom.c.d"]])
            #expect(lines.status == 400)
            let trailing = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": ["com.a.b\n"]])
            #expect(trailing.errorCode == "credential_required")  // valid, and new: verified first
        }
    }

    /// A blank element is refused rather than skipped: the list replaces the app's, so
    /// skipping it would remove every bundle id, and their devices, for a typo.
    @Test func aBlankBundleIDInTheArrayIsRefusedAndNothingChanges() async throws {
        try await AdminHarness.with { admin in
            let app = try await admin.app(account: try await admin.account())
            let bundle = Self.bundleID("kept")
            try await admin.insertIdentifier(bundle, app: app)
            let subscription = try await admin.insertSubscription(app: app, topic: bundle)
            for blank in ["", "   "] {
                let refused = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": [blank]])
                #expect(refused.status == 400)
                #expect(refused.errorMessage?.hasPrefix("bundle id \"\" is not valid") == true)
            }
            #expect(try await admin.subscriptionExists(subscription))
            let shown = try await admin.call("GET", "/apps/\(app)")
            #expect(shown.json["bundleIds"] as? [String] == [bundle])
            // The console's text skips blank lines (so an empty text would be an empty list).
            let text = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": "\n \n\(bundle)\n"])
            #expect(text.status == 200)
            #expect(text.json["bundleIds"] as? [String] == [bundle])
        }
    }

    @Test func removingAnIdentifierDeletesExactlyItsSubscriptions() async throws {
        let invalidator = RecordingInvalidator()
        try await AdminHarness.with(invalidator: invalidator) { admin in
            let account = try await admin.account()
            let app = try await admin.app(account: account)
            let (kept, removed) = (Self.bundleID("kept"), Self.bundleID("removed"))
            try await admin.insertIdentifier(kept, app: app)
            try await admin.insertIdentifier(removed, app: app)
            let keptSubscription = try await admin.insertSubscription(app: app, topic: kept)
            let removedSubscriptions = [
                try await admin.insertSubscription(app: app, topic: removed),
                try await admin.insertSubscription(app: app, topic: removed),
            ]
            let otherApp = try await admin.app(account: account)
            let otherBundle = Self.bundleID("other")
            try await admin.insertIdentifier(otherBundle, app: otherApp)
            let otherSubscription = try await admin.insertSubscription(app: otherApp, topic: otherBundle)

            // Only a removal: nothing new to verify, so APNs is not asked.
            let saved = try await admin.call("PATCH", "/apps/\(app)/push", ["bundleIds": [kept]])
            #expect(saved.status == 200)
            #expect(saved.json["bundleIds"] as? [String] == [kept])
            #expect(try await admin.subscriptionExists(keptSubscription))
            #expect(try await admin.subscriptionExists(otherSubscription))
            for id in removedSubscriptions { #expect(try await !admin.subscriptionExists(id)) }
            #expect(
                invalidator.events == [
                    "app \(app) \([kept, removed].sorted().joined(separator: ","))",
                    "deleted \(removedSubscriptions.sorted().joined(separator: ","))",
                ])
        }
    }

    @Test func disablingKeepsIdentifiersAndSubscriptionsAndReenablingRestoresThem() async throws {
        let invalidator = RecordingInvalidator()
        try await AdminHarness.with(invalidator: invalidator) { admin in
            let account = try await admin.account()
            let app = try await admin.app(account: account)
            let bundle = Self.bundleID("onoff")
            try await admin.insertIdentifier(bundle, app: app)
            let subscription = try await admin.insertSubscription(app: app, topic: bundle)
            #expect(try await admin.call("PATCH", "/apps/\(app)/push", ["enabled": true]).status == 200)
            let off = try await admin.call("PATCH", "/apps/\(app)/push", ["enabled": false])
            #expect(off.json["pushEnabled"] as? Bool == false)
            #expect(off.json["bundleIds"] as? [String] == [bundle])
            #expect(try await admin.subscriptionExists(subscription))
            let on = try await admin.call("PATCH", "/apps/\(app)/push", ["enabled": true])
            #expect(on.json["pushEnabled"] as? Bool == true)
            #expect(invalidator.events == Array(repeating: "app \(app) \(bundle)", count: 3))
            // A repeat that changes nothing drops the app's entries again (the first
            // try's invalidation may have been lost with its answer).
            #expect(try await admin.call("PATCH", "/apps/\(app)/push", ["enabled": true]).status == 200)
            #expect(invalidator.events == Array(repeating: "app \(app) \(bundle)", count: 4))
        }
    }

    /// APNs is asked outside the transaction: while a probe waits, the app's row is not
    /// locked (another session locks it at once, NOWAIT). A change made meanwhile that the
    /// probes did not cover (a bundle id added, which the new credential must reach) is
    /// refused with 409 `concurrent_update`, and nothing is saved; retried, it succeeds.
    @Test func probesHoldNoRowLockAndAChangeTheyDidNotCoverIsRefused() async throws {
        let probe = HookedProbe()
        try await AdminHarness.with(probe: probe) { admin in
            let account = try await admin.account()
            let app = try await admin.app(account: account)
            let first = Self.bundleID("first")
            let added = Self.bundleID("meanwhile")
            try await admin.insertIdentifier(first, app: app)
            let credential = try await admin.insertCredential(account: account)
            let rowWasFree = Mutex<Bool?>(nil)
            probe.hook.withLock {
                $0 = {
                    let free: Bool
                    do {
                        _ = try await admin.postgres.withTransaction { connection in
                            try await connection.query("SELECT id FROM apps WHERE id = \(app) FOR UPDATE NOWAIT")
                        }
                        free = true
                    } catch {
                        free = false
                    }
                    rowWasFree.withLock { $0 = free }
                    try? await admin.insertIdentifier(added, app: app)
                }
            }
            let refused = try await admin.call("PATCH", "/apps/\(app)/push", ["credentialId": credential])
            #expect(rowWasFree.withLock { $0 } == true)
            #expect(refused.status == 409)
            #expect(refused.errorCode == "concurrent_update")
            #expect(try await admin.call("GET", "/apps/\(app)").json["credentialId"] is NSNull)

            let saved = try await admin.call("PATCH", "/apps/\(app)/push", ["credentialId": credential])
            #expect(saved.status == 200)
            #expect(saved.json["credentialId"] as? String == credential)
            #expect(Set(probe.topics.withLock { $0 }) == [first, added])
        }
    }
}

/// Apple's stand-in for `probesHoldNoRowLockAndAChangeTheyDidNotCoverIsRefused`: accepts
/// every probe, records its topic, and runs `hook` (once) while the first one waits.
final class HookedProbe: CredentialProbe {
    let hook = Mutex<(@Sendable () async -> Void)?>(nil)
    let topics = Mutex<[String]>([])

    func probe(teamID: String, keyID: String, privateKey: P256PrivateKey, topics probed: [String])
        async throws(CredentialProbeError) -> [CredentialProbeResult]
    {
        topics.withLock { $0.append(contentsOf: probed) }
        let once = hook.withLock { hook in
            defer { hook = nil }
            return hook
        }
        await once?()
        return probed.map { _ in .accepted }
    }
}
