/// Why pushctl stops, and its exit status: 1 the admin API refused (its code and
/// message are shown), 2 the command line is wrong, 3 the admin API could not be reached.
struct PushctlError: Error, CustomStringConvertible {
    enum Kind {
        case usage
        case api(status: Int, code: String)
        case unreachable
        case local
    }

    let kind: Kind
    let message: String

    var exitStatus: Int32 {
        switch kind {
        case .api: 1
        case .usage: 2
        case .unreachable: 3
        case .local: 2
        }
    }

    var description: String {
        switch kind {
        case .usage: "pushctl: \(message)\nRun 'pushctl --help' for usage."
        case .api(let status, let code): "pushctl: \(message) (\(code), HTTP \(status))"
        case .unreachable, .local: "pushctl: \(message)"
        }
    }

    static func usage(_ message: String) -> PushctlError { PushctlError(kind: .usage, message: message) }
}
