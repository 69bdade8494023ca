import Foundation

/// Parses the command line and runs one command against the admin API.
struct Pushctl {
    static let globalOptions: Set<String> = ["url", "token", "actor"]
    static let globalFlags: Set<String> = ["json", "help"]
    /// The page `account list` asks for without `--limit` (sent, so the "more may
    /// follow" hint compares with what was asked).
    static let defaultPageSize = 100
    /// The first words `run` knows: anything else is a usage error before any
    /// configuration is looked at.
    static let commands: Set<String> = ["account", "usage", "counts", "credential", "app", "user", "activity"]

    let output: Output
    let client: AdminClient

    /// Runs `arguments` (without the program name); returns the exit status.
    static func main(_ arguments: [String], environment: [String: String]) async -> Int32 {
        do {
            let (words, global) = try splitGlobal(arguments)
            if global.flag("help") || words.isEmpty || words == ["help"] {
                print(Help.text)
                return words.isEmpty && !global.flag("help") ? 2 : 0
            }
            guard commands.contains(words[0]) else { throw PushctlError.usage("unknown command \(words[0])") }
            let urlText = global.value("url") ?? environment["PUSHGATE_ADMIN_URL"] ?? "http://127.0.0.1:8081"
            guard let url = URL(string: urlText), ["http", "https"].contains(url.scheme ?? ""), url.host != nil else {
                throw PushctlError.usage("the admin URL must be http(s)://host:port, got \(urlText)")
            }
            guard let token = global.value("token") ?? environment["PUSHGATE_ADMIN_TOKEN"], !token.isEmpty else {
                throw PushctlError.usage("no admin token: set PUSHGATE_ADMIN_TOKEN or pass --token")
            }
            guard !token.unicodeScalars.contains(where: Self.isControl) else {
                throw PushctlError.usage("the admin token must not contain control characters")
            }
            let actor = global.value("actor") ?? environment["PUSHGATE_ACTOR"]
            if let actor, actor.unicodeScalars.contains(where: Self.isControl) {
                throw PushctlError.usage("the actor must not contain control characters")
            }
            if let actor, actor.trimmingCharacters(in: .whitespaces).isEmpty {
                throw PushctlError.usage("the actor must not be empty (--actor or PUSHGATE_ACTOR)")
            }
            let pushctl = Pushctl(
                output: Output(json: global.flag("json")), client: AdminClient(baseURL: url, token: token, actor: actor)
            )
            try await pushctl.run(words)
            return 0
        } catch let error as PushctlError {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            return error.exitStatus
        } catch {
            FileHandle.standardError.write(Data("pushctl: \(error)\n".utf8))
            return 1
        }
    }

    /// Characters a header value cannot carry.
    static func isControl(_ scalar: Unicode.Scalar) -> Bool { scalar.value < 0x20 || scalar.value == 0x7F }

    /// Takes the global options out, wherever they are; the rest stays in order.
    static func splitGlobal(_ arguments: [String]) throws(PushctlError) -> ([String], Arguments) {
        var rest: [String] = []
        var global: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name =
                argument.hasPrefix("--") ? String(argument.dropFirst(2).split(separator: "=", maxSplits: 1)[0]) : ""
            if globalFlags.contains(name) {
                global.append(argument)
            } else if globalOptions.contains(name) {
                global.append(argument)
                if !argument.contains("="), index + 1 < arguments.count {
                    index += 1
                    global.append(arguments[index])
                }
            } else {
                rest.append(argument)
            }
            index += 1
        }
        return (rest, try Arguments(global, options: globalOptions, flags: globalFlags))
    }

    func run(_ words: [String]) async throws(PushctlError) {
        let (group, rest) = (words[0], Array(words.dropFirst()))
        switch group {
        case "account": try await account(rest)
        case "usage": try await usage(try Arguments(rest, options: [], flags: []).single("ACCOUNT"))
        case "counts": try await counts(try Arguments(rest, options: ["from", "to", "app"], flags: []))
        case "credential": try await credential(rest)
        case "app": try await app(rest)
        case "user": try await user(rest)
        case "activity":
            try await activity(try Arguments(rest, options: ["account", "subject", "limit", "before"], flags: []))
        default: throw .usage("unknown command \(group)")
        }
    }

    private func subcommand(_ words: [String], _ group: String) throws(PushctlError) -> (String, [String]) {
        guard let first = words.first else { throw .usage("\(group) needs a subcommand") }
        return (first, Array(words.dropFirst()))
    }

    static func path(_ segment: String) -> String {
        segment.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~:@")))
            ?? segment
    }

    // MARK: Accounts

    private func account(_ words: [String]) async throws(PushctlError) {
        let (name, rest) = try subcommand(words, "account")
        let accountColumns = ["id", "plan", "name"]
        switch name {
        case "create":
            let arguments = try Arguments(rest, options: ["id", "name", "plan"], flags: [])
            try arguments.none()
            var body: [String: Any] = [:]
            body["id"] = arguments.value("id")
            body["name"] = arguments.value("name")
            body["plan"] = try arguments.value("plan").map(Self.plan)
            output.show(try await client.call("POST", "/accounts", body: body))
        case "list":
            let arguments = try Arguments(rest, options: ["limit", "after"], flags: [])
            try arguments.none()
            var query: [(String, String)] = []
            let limit = try arguments.limit() ?? Self.defaultPageSize
            query.append(("limit", String(limit)))
            if let after = arguments.value("after") { query.append(("after", after)) }
            let answer = try await client.call("GET", "/accounts", query: query)
            output.show(answer, list: "accounts", columns: accountColumns)
            // A full page: say how to get the next one (on stderr, so --json stays JSON).
            let accounts = (answer as? [String: Any])?["accounts"] as? [[String: Any]] ?? []
            if accounts.count == limit, let last = accounts.last?["id"] as? String {
                fflush(nil)  // the page first, then the hint, when both go to one pipe
                FileHandle.standardError.write(Data("(more may follow: --after \(last))\n".utf8))
            }
        case "show":
            let id = try Arguments(rest, options: [], flags: []).single("ACCOUNT")
            output.show(try await client.call("GET", "/accounts/\(Self.path(id))"))
        case "update":
            let arguments = try Arguments(rest, options: ["name", "plan"], flags: [])
            let id = try arguments.single("ACCOUNT")
            var body: [String: Any] = [:]
            body["name"] = arguments.value("name")
            body["plan"] = try arguments.value("plan").map(Self.plan)
            guard !body.isEmpty else { throw .usage("account update needs --name or --plan") }
            output.show(try await client.call("PATCH", "/accounts/\(Self.path(id))", body: body))
        case "delete":
            let id = try Arguments(rest, options: [], flags: []).single("ACCOUNT")
            _ = try await client.call("DELETE", "/accounts/\(Self.path(id))")
            output.message("deleted account \(id)")
        default: throw .usage("unknown command account \(name)")
        }
    }

    private func usage(_ account: String) async throws(PushctlError) {
        let usage = try await client.call("GET", "/accounts/\(Self.path(account))/usage")
        guard !output.json, let object = usage as? [String: Any] else { return output.show(usage) }
        let limit = object["limit"].flatMap { $0 is NSNull ? nil : Output.text($0) } ?? "unlimited"
        print(
            "\(Output.text(object["accountId"])) \(Output.text(object["month"])) (\(Output.text(object["plan"]))): "
                + "\(Output.text(object["used"])) / \(limit)")
    }

    private func counts(_ arguments: Arguments) async throws(PushctlError) {
        let account = try arguments.single("ACCOUNT")
        let query = ["from", "to", "app"].compactMap { name in arguments.value(name).map { (name, $0) } }
        output.show(
            try await client.call("GET", "/accounts/\(Self.path(account))/daily-counts", query: query), list: "days",
            columns: ["day", "appId", "sent", "failed", "gone"])
    }

    static func plan(_ text: String) throws(PushctlError) -> String {
        let plan = text.lowercased()
        guard ["lite", "plus", "pro", "enterprise"].contains(plan) else {
            throw .usage("--plan must be lite, plus, pro or enterprise")
        }
        return plan
    }

    // MARK: Credentials

    private func credential(_ words: [String]) async throws(PushctlError) {
        let (name, rest) = try subcommand(words, "credential")
        switch name {
        case "add":
            let arguments = try Arguments(rest, options: ["account", "key-id", "team-id", "p8"], flags: [])
            try arguments.none()
            let account = try arguments.required("account")
            let pem = try Self.readFile(try arguments.required("p8"))
            let body: [String: Any] = [
                "keyId": try arguments.required("key-id"), "teamId": try arguments.required("team-id"),
                "privateKey": pem,
            ]
            output.show(try await client.call("POST", "/accounts/\(Self.path(account))/credentials", body: body))
        case "list":
            let arguments = try Arguments(rest, options: ["account"], flags: [])
            try arguments.none()
            let account = try arguments.required("account")
            output.show(
                try await client.call("GET", "/accounts/\(Self.path(account))/credentials"), list: "credentials",
                columns: ["id", "keyId", "teamId", "status", "apps", "warning"])
        case "show":
            let id = try Arguments(rest, options: [], flags: []).single("CREDENTIAL")
            output.show(try await client.call("GET", "/credentials/\(Self.path(id))"))
        case "verify":
            let id = try Arguments(rest, options: [], flags: []).single("CREDENTIAL")
            output.show(try await client.call("POST", "/credentials/\(Self.path(id))/verify"))
        case "delete":
            let arguments = try Arguments(rest, options: [], flags: ["detach"])
            let id = try arguments.single("CREDENTIAL")
            _ = try await client.call(
                "DELETE", "/credentials/\(Self.path(id))", query: arguments.flag("detach") ? [("detach", "true")] : [])
            output.message("deleted credential \(id)")
        default: throw .usage("unknown command credential \(name)")
        }
    }

    /// The text of the file at `path` (standard input for `-`); a file that cannot be
    /// read is refused with the system's reason (no such file, a directory, …).
    static func readFile(_ path: String) throws(PushctlError) -> String {
        let data: Data
        do {
            data = try path == "-" ? FileHandle.standardInput.readToEnd() ?? Data() : readContents(of: path)
        } catch {
            throw PushctlError(kind: .local, message: "cannot read \(path): \(error.localizedDescription)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw PushctlError(kind: .local, message: "cannot read \(path): not UTF-8 text")
        }
        return text
    }

    /// Reads through the file descriptor (so a device such as `/dev/null` reads as
    /// empty); errno's text when it cannot be opened or read.
    private static func readContents(of path: String) throws -> Data {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileError(errno: errno) }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        var status = stat()
        if fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFDIR { throw FileError(errno: EISDIR) }
        return try handle.readToEnd() ?? Data()
    }

    private struct FileError: LocalizedError {
        let errno: Int32
        var errorDescription: String? { String(cString: strerror(errno)) }
    }

    // MARK: Apps

    private func app(_ words: [String]) async throws(PushctlError) {
        let (name, rest) = try subcommand(words, "app")
        let appColumns = ["id", "pushEnabled", "credentialId", "bundleIds", "name", "warning"]
        switch name {
        case "create":
            let arguments = try Arguments(rest, options: ["account", "id", "name"], flags: [])
            try arguments.none()
            let account = try arguments.required("account")
            var body: [String: Any] = [:]
            body["id"] = arguments.value("id")
            body["name"] = arguments.value("name")
            output.show(try await client.call("POST", "/accounts/\(Self.path(account))/apps", body: body))
        case "list":
            let arguments = try Arguments(rest, options: ["account"], flags: [])
            try arguments.none()
            output.show(
                try await client.call("GET", "/accounts/\(Self.path(try arguments.required("account")))/apps"),
                list: "apps", columns: appColumns)
        case "show":
            let id = try Arguments(rest, options: [], flags: []).single("APP")
            output.show(try await client.call("GET", "/apps/\(Self.path(id))"))
        case "rename":
            let arguments = try Arguments(rest, options: [], flags: [])
            guard arguments.positionals.count == 2 else { throw .usage("usage: pushctl app rename APP NAME") }
            output.show(
                try await client.call(
                    "PATCH", "/apps/\(Self.path(arguments.positionals[0]))", body: ["name": arguments.positionals[1]]))
        case "delete":
            let id = try Arguments(rest, options: [], flags: []).single("APP")
            _ = try await client.call("DELETE", "/apps/\(Self.path(id))")
            output.message("deleted app \(id)")
        case "push":
            try await push(rest)
        case "key":
            try await key(rest)
        default: throw .usage("unknown command app \(name)")
        }
    }

    private func push(_ rest: [String]) async throws(PushctlError) {
        let arguments = try Arguments(
            rest, options: ["credential", "bundle-id", "bundle-ids-file"],
            flags: ["enable", "disable", "no-credential", "no-bundle-ids"])
        let id = try arguments.single("APP")
        var body: [String: Any] = [:]
        switch (arguments.flag("enable"), arguments.flag("disable")) {
        case (true, true): throw .usage("--enable and --disable exclude each other")
        case (true, false): body["enabled"] = true
        case (false, true): body["enabled"] = false
        case (false, false): break
        }
        if arguments.flag("no-credential") {
            guard arguments.value("credential") == nil else {
                throw .usage("--credential and --no-credential exclude each other")
            }
            body["credentialId"] = NSNull()
        } else if let credential = arguments.value("credential") {
            body["credentialId"] = credential
        }
        var bundleIDs = arguments.all("bundle-id")
        if let file = arguments.value("bundle-ids-file") {
            // One id per line, blank lines skipped; an empty file is a mistake, not "none".
            let listed = try Self.readFile(file).split(whereSeparator: \.isNewline)
                .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard !listed.isEmpty else {
                throw .usage("\(file) lists no bundle ids (--no-bundle-ids removes them all)")
            }
            bundleIDs += listed
        }
        if arguments.flag("no-bundle-ids") {
            guard bundleIDs.isEmpty else { throw .usage("--no-bundle-ids excludes --bundle-id and --bundle-ids-file") }
            body["bundleIds"] = [String]()
        } else if !bundleIDs.isEmpty {
            body["bundleIds"] = bundleIDs
        }
        guard !body.isEmpty else {
            throw .usage("app push needs --enable/--disable, --credential/--no-credential or bundle ids")
        }
        output.show(try await client.call("PATCH", "/apps/\(Self.path(id))/push", body: body))
    }

    private func key(_ words: [String]) async throws(PushctlError) {
        let (name, rest) = try subcommand(words, "app key")
        switch name {
        case "create":
            let arguments = try Arguments(rest, options: ["name", "scope"], flags: [])
            let app = try arguments.single("APP")
            var body: [String: Any] = [:]
            body["name"] = arguments.value("name")
            if !arguments.all("scope").isEmpty { body["scopes"] = arguments.all("scope") }
            let created = try await client.call("POST", "/apps/\(Self.path(app))/keys", body: body)
            guard !output.json, let object = created as? [String: Any] else { return output.show(created) }
            print("key: \(Output.text(object["key"]))")
            print("id: \(Output.text(object["id"]))  scopes: \(Output.text(object["scopes"]))")
            print("Store the key now: it is shown only once.")
        case "list":
            let app = try Arguments(rest, options: [], flags: []).single("APP")
            output.show(
                try await client.call("GET", "/apps/\(Self.path(app))/keys"), list: "keys",
                columns: ["id", "name", "scopes", "createdAt", "revokedAt"])
        case "revoke":
            let arguments = try Arguments(rest, options: [], flags: [])
            guard arguments.positionals.count == 2 else { throw .usage("usage: pushctl app key revoke APP KEY_ID") }
            output.show(
                try await client.call(
                    "DELETE", "/apps/\(Self.path(arguments.positionals[0]))/keys/\(Self.path(arguments.positionals[1]))"
                ))
        default: throw .usage("unknown command app key \(name)")
        }
    }

    // MARK: Users

    private func user(_ words: [String]) async throws(PushctlError) {
        let (name, rest) = try subcommand(words, "user")
        switch name {
        case "upsert":
            let id = try Arguments(rest, options: [], flags: []).single("USER")
            output.show(try await client.call("PUT", "/users/\(Self.path(id))"))
        case "show":
            let id = try Arguments(rest, options: [], flags: []).single("USER")
            output.show(try await client.call("GET", "/users/\(Self.path(id))"))
        case "delete":
            let id = try Arguments(rest, options: [], flags: []).single("USER")
            _ = try await client.call("DELETE", "/users/\(Self.path(id))")
            output.message("deleted user \(id)")
        case "ban":
            let arguments = try Arguments(rest, options: ["reason"], flags: [])
            let id = try arguments.single("USER")
            var body: [String: Any] = [:]
            body["reason"] = arguments.value("reason")
            output.show(try await client.call("PUT", "/users/\(Self.path(id))/ban", body: body))
        case "unban":
            let id = try Arguments(rest, options: [], flags: []).single("USER")
            output.show(try await client.call("DELETE", "/users/\(Self.path(id))/ban"))
        case "app":
            let arguments = try Arguments(
                rest, options: ["app", "authorized", "unsubscribed", "disabled", "reason"], flags: [])
            let id = try arguments.single("USER")
            let app = try arguments.required("app")
            var body: [String: Any] = [:]
            body["authorized"] = try arguments.boolean("authorized")
            body["unsubscribed"] = try arguments.boolean("unsubscribed")
            body["disabled"] = try arguments.boolean("disabled")
            body["disabledReason"] = arguments.value("reason")
            if body.isEmpty {
                output.show(try await client.call("GET", "/apps/\(Self.path(app))/users/\(Self.path(id))"))
            } else {
                output.show(
                    try await client.call("PATCH", "/apps/\(Self.path(app))/users/\(Self.path(id))", body: body))
            }
        default: throw .usage("unknown command user \(name)")
        }
    }

    // MARK: Activity

    private func activity(_ arguments: Arguments) async throws(PushctlError) {
        try arguments.none()
        var query: [(String, String)] = []
        for name in ["account", "subject", "before"] {
            if let value = arguments.value(name) { query.append((name, value)) }
        }
        if let limit = try arguments.limit() { query.append(("limit", String(limit))) }
        output.show(
            try await client.call("GET", "/activity", query: query), list: "entries",
            columns: ["id", "at", "actor", "action", "subject", "before", "after"])
    }
}
