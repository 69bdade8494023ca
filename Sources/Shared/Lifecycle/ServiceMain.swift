import Foundation

/// Start-up helpers shared by the executables' thin `main`s.
public enum ServiceMain {
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
