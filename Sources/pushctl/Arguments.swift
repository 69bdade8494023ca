/// A command's arguments after the command words: positionals, `--option value`
/// (or `--option=value`) and `--flag`. Options a command does not declare are errors.
struct Arguments {
    private(set) var positionals: [String] = []
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []

    init(_ arguments: [String], options: Set<String>, flags known: Set<String>) throws(PushctlError) {
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositionals || !argument.hasPrefix("--") || argument == "-" {
                positionals.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositionals = true
                continue
            }
            var name = String(argument.dropFirst(2))
            var inline: String?
            if let equals = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if known.contains(name) {
                guard inline == nil else { throw .usage("--\(name) takes no value") }
                flags.insert(name)
            } else if options.contains(name) {
                if let inline {
                    values[name, default: []].append(inline)
                } else {
                    guard index < arguments.count else { throw .usage("--\(name) needs a value") }
                    values[name, default: []].append(arguments[index])
                    index += 1
                }
            } else {
                throw .usage("unknown option --\(name)")
            }
        }
    }

    func value(_ name: String) -> String? { values[name]?.last }

    func all(_ name: String) -> [String] { values[name] ?? [] }

    func flag(_ name: String) -> Bool { flags.contains(name) }

    func required(_ name: String) throws(PushctlError) -> String {
        guard let value = value(name) else { throw .usage("--\(name) is required") }
        return value
    }

    /// The only positional argument, named `what` in the error.
    func single(_ what: String) throws(PushctlError) -> String {
        guard positionals.count == 1 else {
            throw .usage(
                positionals.isEmpty ? "\(what) is required" : "expected one \(what), got \(positionals.count) arguments"
            )
        }
        return positionals[0]
    }

    func none() throws(PushctlError) {
        guard positionals.isEmpty else { throw .usage("unexpected argument \(positionals[0])") }
    }

    /// `--limit`: a whole number from 1 to 1000 (the admin API's pages), checked here so
    /// a typo is a usage error (2), not the admin API's refusal (1).
    func limit() throws(PushctlError) -> Int? {
        guard let text = value("limit") else { return nil }
        guard let number = Int(text), (1...1000).contains(number) else {
            throw .usage("--limit must be a whole number from 1 to 1000")
        }
        return number
    }

    /// `true`/`false` (also yes/no, on/off, 1/0).
    func boolean(_ name: String) throws(PushctlError) -> Bool? {
        guard let text = value(name) else { return nil }
        switch text.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw .usage("--\(name) must be true or false")
        }
    }
}
