import Foundation

/// A value that can be a command argument: its exact bytes are sent, with an
/// explicit length, so any byte (NUL, invalid UTF-8) is safe.
public protocol RedisValueConvertible: Sendable {
    var redisBytes: [UInt8] { get }
}

extension String: RedisValueConvertible {
    public var redisBytes: [UInt8] { Array(utf8) }
}

extension Substring: RedisValueConvertible {
    public var redisBytes: [UInt8] { Array(utf8) }
}

extension Int: RedisValueConvertible {
    public var redisBytes: [UInt8] { Array(String(self).utf8) }
}

extension Int64: RedisValueConvertible {
    public var redisBytes: [UInt8] { Array(String(self).utf8) }
}

extension UInt64: RedisValueConvertible {
    public var redisBytes: [UInt8] { Array(String(self).utf8) }
}

extension Double: RedisValueConvertible {
    /// Shortest round-tripping decimal; `inf`/`-inf` as Redis spells them.
    public var redisBytes: [UInt8] {
        if self == .infinity { return Array("inf".utf8) }
        if self == -.infinity { return Array("-inf".utf8) }
        return Array(description.utf8)
    }
}

extension Array: RedisValueConvertible where Element == UInt8 {
    public var redisBytes: [UInt8] { self }
}

extension Data: RedisValueConvertible {
    public var redisBytes: [UInt8] { Array(self) }
}

/// One command as argv: the name and its arguments as bytes.
///
///     RedisCommand("SET", key, payload, "EX", 60)
public struct RedisCommand: Sendable, Hashable {
    public var argv: [[UInt8]]
    /// Set for `EVALSHA` commands built by `script(_:keys:arguments:)`, so a
    /// NOSCRIPT reply can be answered by loading the script and running it again.
    public let script: RedisScript?

    public init(_ name: String, _ arguments: any RedisValueConvertible...) {
        self.init(name, arguments: arguments)
    }

    public init(_ name: String, arguments: [any RedisValueConvertible]) {
        argv = [Array(name.utf8)] + arguments.map(\.redisBytes)
        script = nil
    }

    /// A command given as raw argv; `argv` must not be empty.
    public init(argv: [[UInt8]]) {
        precondition(!argv.isEmpty, "a Redis command needs a name")
        self.argv = argv
        script = nil
    }

    /// `EVALSHA sha numkeys keys… arguments…` of a script.
    public static func script(
        _ script: RedisScript, keys: [any RedisValueConvertible] = [], arguments: [any RedisValueConvertible] = []
    ) -> RedisCommand {
        RedisCommand(
            argv: [Array("EVALSHA".utf8), Array(script.sha1.utf8), keys.count.redisBytes]
                + keys.map(\.redisBytes) + arguments.map(\.redisBytes),
            script: script)
    }

    private init(argv: [[UInt8]], script: RedisScript?) {
        self.argv = argv
        self.script = script
    }

    /// The command's name in upper case, for errors and logs (never the arguments).
    public var name: String {
        String(decoding: argv.first ?? [], as: UTF8.self).uppercased()
    }
}
