/// A configuration variable that is missing or invalid. Services print its
/// `description` as one line and exit with status 2.
public struct ConfigurationError: Error, Equatable, CustomStringConvertible {
    /// The environment variable, e.g. `DATABASE_URL`.
    public let variable: String
    /// What is wrong with it, never echoing a secret value.
    public let problem: String

    public init(variable: String, problem: String) {
        self.variable = variable
        self.problem = problem
    }

    public var description: String { "configuration error: \(variable) \(problem)" }
}
