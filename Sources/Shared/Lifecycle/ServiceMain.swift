import Foundation

/// Start-up helpers shared by the executables' thin `main`s.
public enum ServiceMain {
    /// What an executable's arguments ask for.
    public enum Invocation: Equatable, Sendable {
        /// No argument: run the service.
        case service
        /// One of the executable's commands (`migrate`, …), alone.
        case command(String)
        /// `--help`, `-h` or `help`.
        case help
        /// Anything else, quoted in the error.
        case unknown(String)
    }

    /// Reads `arguments` (the program's name first) against the executable's `commands`.
    public static func invocation(_ arguments: [String], commands: Set<String>) -> Invocation {
        let given = Array(arguments.dropFirst())
        guard let first = given.first else { return .service }
        if ["--help", "-h", "help"].contains(first) { return .help }
        guard commands.contains(first), given.count == 1 else { return .unknown(given.joined(separator: " ")) }
        return .command(first)
    }

    /// The command the program's arguments name, or nil to run the service. Help
    /// prints `usage` and exits 0; anything else exits 2 with `usage` on standard
    /// error, so a mistyped command never starts a service instead.
    public static func command(usage: String, commands: Set<String>) -> String? {
        switch invocation(CommandLine.arguments, commands: commands) {
        case .service: return nil
        case .command(let command): return command
        case .help:
            FileHandle.standardOutput.write(Data((usage + "\n").utf8))
            exit(0)
        case .unknown(let text):
            FileHandle.standardError.write(Data(("unknown arguments: \(text)\n" + usage + "\n").utf8))
            exit(2)
        }
    }

    /// Parses configuration or exits with status 2 and one line naming the variable.
    public static func load<Configuration>(
        _ parse: () throws(ConfigurationError) -> Configuration
    ) -> Configuration {
        do {
            return try parse()
        } catch {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            exit(2)
        }
    }
}
