import Shared

/// The command line: `--config <file.json> --listen <host:port> --control <host:port> --ca-out <path>`
/// (ports may be 0), plus `--log-level debug|info|…` (default info; nothing is
/// logged per request at info).
struct SimulatorArguments: Sendable {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static let usage =
        "usage: apns-simulator --config <file.json> [--listen 127.0.0.1:2197] [--control 127.0.0.1:2198] "
        + "[--ca-out <path>] [--log-level info]"

    var configPath: String
    var listen = ListenAddress(host: "127.0.0.1", port: 2197)
    var control = ListenAddress(host: "127.0.0.1", port: 2198)
    var caFile = "apns-simulator-ca.pem"
    var logLevel = Logger.Level.info

    init(_ arguments: some Sequence<String>) throws(Failure) {
        var config: String?
        var iterator = arguments.makeIterator()
        while let flag = iterator.next() {
            guard let value = iterator.next() else { throw Failure(description: "\(flag) needs a value") }
            switch flag {
            case "--config": config = value
            case "--listen": listen = try Self.address(value, flag)
            case "--control": control = try Self.address(value, flag)
            case "--ca-out": caFile = value
            case "--log-level":
                guard let level = Logger.Level(name: value) else {
                    throw Failure(description: "unknown log level \(value)")
                }
                logLevel = level
            default: throw Failure(description: "unknown option \(flag)")
            }
        }
        guard let config else { throw Failure(description: "--config is required") }
        configPath = config
    }

    private static func address(_ text: String, _ flag: String) throws(Failure) -> ListenAddress {
        guard let address = ListenAddress(text) else {
            throw Failure(description: "\(flag): expected host:port, got \(text)")
        }
        return address
    }
}
