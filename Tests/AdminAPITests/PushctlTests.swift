import Foundation
import Shared
import TestSupport
import Testing

/// The built `pushctl` against a running admin API: output, errors, exit status.
@Suite struct PushctlTests {
    struct Run {
        let status: Int32
        let output: String
        let error: String
    }

    static func pushctl(
        _ arguments: [String], port: Int?, token: String? = AdminHarness.token, url: String? = nil,
        environment extra: [String: String] = [:]
    ) async throws -> Run {
        var environment = ["PATH": "/usr/bin:/bin"].merging(extra) { $1 }
        if let port { environment["PUSHGATE_ADMIN_URL"] = "http://127.0.0.1:\(port)" }
        if let url { environment["PUSHGATE_ADMIN_URL"] = url }
        if let token { environment["PUSHGATE_ADMIN_TOKEN"] = token }
        let result = try await BuiltExecutable.run("pushctl", arguments, environment: environment)
        return Run(status: result.status, output: result.standardOutput, error: result.standardError)
    }

    @Test func helpListsEveryCommandGroupAndExitsZero() async throws {
        let help = try await Self.pushctl(["--help"], port: nil, token: nil)
        #expect(help.status == 0)
        for command in [
            "account create", "usage ACCOUNT", "counts ACCOUNT", "credential add", "app push", "app key create",
            "user ban", "activity",
        ] {
            #expect(help.output.contains(command), "help mentions \(command)")
        }
        let bare = try await Self.pushctl([], port: nil, token: nil)
        #expect(bare.status == 2)
    }

    @Test func commandLineMistakesExit2AndNameTheProblem() async throws {
        let noToken = try await Self.pushctl(["account", "list"], port: 1, token: nil)
        #expect(noToken.status == 2)
        #expect(noToken.error.hasPrefix("pushctl: no admin token: set PUSHGATE_ADMIN_TOKEN or pass --token"))
        // A mistyped command is named as such, token or not.
        let mistyped = try await Self.pushctl(["acount", "list"], port: 1, token: nil)
        #expect(mistyped.status == 2)
        #expect(mistyped.error.hasPrefix("pushctl: unknown command acount"))
        let noActor = try await Self.pushctl(["--actor", " ", "account", "list"], port: 1)
        #expect(noActor.status == 2)
        #expect(noActor.error.hasPrefix("pushctl: the actor must not be empty"))
        let unknown = try await Self.pushctl(["account", "create", "--colour", "red"], port: 1)
        #expect(unknown.status == 2)
        #expect(unknown.error.hasPrefix("pushctl: unknown option --colour"))
        let plan = try await Self.pushctl(["account", "create", "--plan", "gold"], port: 1)
        #expect(plan.status == 2)
        #expect(plan.error.hasPrefix("pushctl: --plan must be lite, plus, pro or enterprise"))
        let unreadable = try await Self.pushctl(
            [
                "credential", "add", "--account", "a", "--key-id", "KEY1234567", "--team-id", "TEAM123456", "--p8",
                "/nonexistent/AuthKey.p8",
            ], port: 1)
        #expect(unreadable.status == 2)
        #expect(unreadable.error.hasPrefix("pushctl: cannot read /nonexistent/AuthKey.p8: No such file or directory"))
        // Why a path cannot be read is said; a device reads as empty, as a file would.
        let folder = try await Self.pushctl(
            [
                "credential", "add", "--account", "a", "--key-id", "KEY1234567", "--team-id", "TEAM123456", "--p8",
                "/tmp",
            ],
            port: 1)
        #expect(folder.status == 2)
        #expect(folder.error.hasPrefix("pushctl: cannot read /tmp: Is a directory"))
        let empty = try await Self.pushctl(["app", "push", "a", "--bundle-ids-file", "/dev/null"], port: 1)
        #expect(empty.status == 2)
        #expect(empty.error.hasPrefix("pushctl: /dev/null lists no bundle ids"))
        for arguments in [
            ["account", "list", "--limit", "abc"], ["activity", "--limit", "0"], ["activity", "--limit", "1001"],
        ] {
            let limit = try await Self.pushctl(arguments, port: 1)
            #expect(limit.status == 2, "\(arguments)")
            #expect(limit.error.hasPrefix("pushctl: --limit must be a whole number from 1 to 1000"))
        }
    }

    @Test func anUnreachableAdminAPIExits3() async throws {
        let run = try await Self.pushctl(["account", "list"], port: 1)
        #expect(run.status == 3)
        #expect(run.error.hasPrefix("pushctl: cannot reach the admin API at http://127.0.0.1:1"))
    }

    /// Behind a TLS-terminating proxy: pushctl checks the certificate (its CA given by
    /// `SSL_CERT_FILE`, and the name it was asked for) and speaks HTTP/1.1 through it.
    @Test func anAdminAPIBehindTLSIsReachedWithItsCertificateChecked() async throws {
        let certificates = try await TestCertificates.make(serverNames: ["localhost"])
        defer { try? FileManager.default.removeItem(at: certificates.directory) }
        try await AdminHarness.with { admin in
            let relay = try await TLSRelayProcess.start(certificates: certificates, upstreamPort: admin.port)
            defer { relay.stop() }
            let trusted = ["SSL_CERT_FILE": certificates.caFile]
            // `localhost` may resolve to ::1 first, where nothing listens: the next address is tried.
            let url = "https://localhost:\(relay.port)"
            let account = AdminHarness.unique("tls")
            let created = try await Self.pushctl(
                ["account", "create", "--id", account, "--name", "Zürich Ops", "--plan", "pro"], port: nil, url: url,
                environment: trusted)
            #expect(created.status == 0, "\(created.error)")
            let shown = try await Self.pushctl(
                ["--json", "account", "show", account], port: nil, url: url, environment: trusted)
            let fields = try JSONSerialization.jsonObject(with: Data(shown.output.utf8)) as? [String: Any]
            #expect(fields?["name"] as? String == "Zürich Ops")
            let missing = try await Self.pushctl(
                ["account", "show", account + "-x"], port: nil, url: url, environment: trusted)
            #expect(missing.status == 1)
            #expect(missing.error.contains("HTTP 404"))

            let untrusted = try await Self.pushctl(["account", "list"], port: nil, url: url)
            #expect(untrusted.status == 3)
            #expect(untrusted.error.hasPrefix("pushctl: cannot reach the admin API at \(url)"))
            #expect(untrusted.error.contains("certificate rejected"), "\(untrusted.error)")
            let otherName = try await Self.pushctl(
                ["account", "list"], port: nil, url: "https://127.0.0.1:\(relay.port)", environment: trusted)
            #expect(otherName.status == 3)
            #expect(otherName.error.contains("certificate rejected"), "\(otherName.error)")
        }
    }

    @Test func accountsPlansUsageAppsAndKeysEndToEnd() async throws {
        try await AdminHarness.with { admin in
            let port = admin.port
            let account = AdminHarness.unique("acct")
            let created = try await Self.pushctl(
                ["account", "create", "--id", account, "--name", "Demo", "--plan", "lite"], port: port)
            #expect(created.status == 0)
            #expect(created.output.contains("id: \(account)\n"))
            #expect(created.output.contains("plan: lite\n"))

            // A full page says how to ask for the next (on stderr: --json output stays JSON).
            let page = try await Self.pushctl(["--json", "account", "list", "--limit", "1"], port: port)
            #expect(page.status == 0)
            let listed = try JSONSerialization.jsonObject(with: Data(page.output.utf8)) as? [String: Any]
            let first = try #require((listed?["accounts"] as? [[String: Any]])?.first?["id"] as? String)
            #expect(page.error == "(more may follow: --after \(first))\n")

            let app = AdminHarness.unique("app")
            #expect(
                try await Self.pushctl(["app", "create", "--account", account, "--id", app], port: port).status == 0)
            let refused = try await Self.pushctl(["app", "push", app, "--enable"], port: port)
            #expect(refused.status == 1)
            #expect(
                refused.error
                    == "pushctl: account \(account) is on the lite plan, which has no push; upgrade it first "
                    + "(plan_without_push, HTTP 422)\n")

            let upgraded = try await Self.pushctl(
                ["--actor", "ops-bot", "account", "update", account, "--plan", "plus"], port: port)
            #expect(upgraded.status == 0)
            let enabled = try await Self.pushctl(["app", "push", app, "--enable", "--json"], port: port)
            #expect(enabled.status == 0)
            let appJSON = try JSONSerialization.jsonObject(with: Data(enabled.output.utf8)) as? [String: Any]
            #expect(appJSON?["pushEnabled"] as? Bool == true)

            // A file of bundle ids: one per line, blank lines and surrounding spaces skipped
            // (these two are the app's already, so no credential is needed to keep them).
            let (one, two) = ("com.\(app).one", "com.\(app).two")
            try await admin.insertIdentifier(one, app: app)
            try await admin.insertIdentifier(two, app: app)
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(app)-bundle-ids")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data("\n \(two) \n\n\(one)\n".utf8).write(to: file)
            let fromFile = try await Self.pushctl(
                ["app", "push", app, "--bundle-ids-file", file.path, "--json"], port: port)
            #expect(fromFile.status == 0)
            let fromFileJSON = try JSONSerialization.jsonObject(with: Data(fromFile.output.utf8)) as? [String: Any]
            #expect(Set(fromFileJSON?["bundleIds"] as? [String] ?? []) == [one, two])
            try Data("\n  \n".utf8).write(to: file)
            let empty = try await Self.pushctl(["app", "push", app, "--bundle-ids-file", file.path], port: port)
            #expect(empty.status == 2)
            #expect(empty.error.hasPrefix("pushctl: \(file.path) lists no bundle ids"))

            let usage = try await Self.pushctl(["--json", "usage", account], port: port)
            let usageJSON = try JSONSerialization.jsonObject(with: Data(usage.output.utf8)) as? [String: Any]
            #expect(usageJSON?["limit"] as? Int == 50000)
            #expect(usageJSON?["used"] as? Int == 0)
            let readable = try await Self.pushctl(["usage", account], port: port)
            #expect(readable.output.hasPrefix("\(account) "))
            #expect(readable.output.hasSuffix("(plus): 0 / 50000\n"))
            try await admin.postgres.execute(
                "INSERT INTO daily_counts (account_id, app_id, day, sent, failed, gone) VALUES (\(account), \(app), '2026-03-04', 7, 2, 1)"
            )
            let counts = try await Self.pushctl(
                ["counts", account, "--from", "2026-03-01", "--to", "2026-03-31", "--app", app], port: port)
            #expect(counts.status == 0)
            #expect(counts.output == "2026-03-04  \(app)  7  2  1\n")
            let noCounts = try await Self.pushctl(["counts", account, "--from", "2026-04-01"], port: port)
            #expect(noCounts.output == "(no days)\n")
            let badDay = try await Self.pushctl(["counts", account, "--from", "2026-02-30"], port: port)
            #expect(badDay.status == 1)
            #expect(badDay.error.contains("query parameter from must be a day as YYYY-MM-DD"))

            let key = try await Self.pushctl(["app", "key", "create", app, "--name", "backend"], port: port)
            #expect(key.status == 0)
            #expect(key.output.hasPrefix("key: pgk_"))
            #expect(key.output.contains("Store the key now: it is shown only once."))
            let keys = try await Self.pushctl(["app", "key", "list", app], port: port)
            #expect(keys.output.contains("backend  push:send"))
            #expect(!keys.output.contains("pgk_"))

            let missing = try await Self.pushctl(["account", "show", "no-such-\(account)"], port: port)
            #expect(missing.status == 1)
            #expect(missing.error == "pushctl: account no-such-\(account) not found (not_found, HTTP 404)\n")

            let activity = try await Self.pushctl(["activity", "--account", account], port: port)
            #expect(activity.status == 0)
            let lines = activity.output.split(separator: "\n")
            #expect(lines.count == 5)
            #expect(lines.contains { $0.contains("ops-bot  account.update  account:\(account)") })
        }
    }

    @Test func usersAndBansEndToEnd() async throws {
        try await AdminHarness.with { admin in
            let port = admin.port
            let account = try await admin.account()
            let app = try await admin.app(account: account)
            let user = AdminHarness.unique("user")
            #expect(try await Self.pushctl(["user", "upsert", user], port: port).status == 0)
            let state = try await Self.pushctl(
                ["user", "app", user, "--app", app, "--authorized", "true", "--unsubscribed", "yes"], port: port)
            #expect(state.status == 0)
            #expect(state.output.contains("authorized: true\n"))
            #expect(state.output.contains("unsubscribed: true\n"))
            let banned = try await Self.pushctl(["user", "ban", user, "--reason", "spam", "--json"], port: port)
            let json = try JSONSerialization.jsonObject(with: Data(banned.output.utf8)) as? [String: Any]
            #expect((json?["banned"] as? [String: Any])?["reason"] as? String == "spam")
            let bad = try await Self.pushctl(["user", "app", user, "--app", app, "--disabled", "maybe"], port: port)
            #expect(bad.status == 2)
        }
    }
}
