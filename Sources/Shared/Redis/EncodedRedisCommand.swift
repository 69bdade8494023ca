/// A command already written in RESP, the form Redis reads (`*<count>` then
/// `$<length>` and the bytes of each argument), so a pipelined connection only
/// appends its bytes. The caller's thread pays for the encoding, not the event
/// loop's, which every command shares.
///
///     EncodedRedisCommand(argumentCount: 3) { $0.append("SET"); $0.append(key); $0.append(Int64(42)) }
public struct EncodedRedisCommand: Sendable {
    public let bytes: [UInt8]
    /// The script of an `EVALSHA`, so a NOSCRIPT reply can be answered by loading it.
    public let script: RedisScript?

    public init(_ command: RedisCommand) {
        var bytes: [UInt8] = []
        RESPEncoder.append(command.argv, to: &bytes)
        self.bytes = bytes
        script = command.script
    }

    /// A command of `argumentCount` arguments (its name included), written by `body`
    /// in order. `body` must append exactly `argumentCount` of them.
    public init(argumentCount: Int, script: RedisScript? = nil, capacity: Int = 256, _ body: (inout Writer) -> Void) {
        var writer = Writer(argumentCount: argumentCount, capacity: capacity)
        body(&writer)
        precondition(writer.remaining == 0, "EncodedRedisCommand: \(writer.remaining) argument(s) missing")
        bytes = writer.bytes
        self.script = script
    }

    /// `EVALSHA sha numkeys keys… arguments…` of a script; `body` appends exactly
    /// `argumentCount` arguments after the keys.
    public static func script(
        _ script: RedisScript, keys: [String], argumentCount: Int, capacity: Int = 256,
        _ body: (inout Writer) -> Void
    ) -> EncodedRedisCommand {
        EncodedRedisCommand(argumentCount: 3 + keys.count + argumentCount, script: script, capacity: capacity) {
            $0.append("EVALSHA")
            $0.append(script.sha1)
            $0.append(Int64(keys.count))
            for key in keys { $0.append(key) }
            body(&$0)
        }
    }

    /// The command's name in upper case, for errors (never the arguments).
    public var name: String {
        // "*<n>\r\n$<len>\r\n<name>\r\n…": the name is the first bulk string.
        guard let dollar = bytes.firstIndex(of: UInt8(ascii: "$")),
            let lineEnd = bytes[dollar...].firstIndex(of: 0x0d),
            let length = Int(String(decoding: bytes[(dollar + 1)..<lineEnd], as: UTF8.self)),
            lineEnd + 2 + length <= bytes.count
        else { return "" }
        return String(decoding: bytes[(lineEnd + 2)..<(lineEnd + 2 + length)], as: UTF8.self).uppercased()
    }

    /// Appends arguments as bulk strings.
    public struct Writer {
        fileprivate var bytes: [UInt8] = []
        fileprivate var remaining: Int

        fileprivate init(argumentCount: Int, capacity: Int) {
            remaining = argumentCount
            bytes.reserveCapacity(capacity)
            bytes.append(UInt8(ascii: "*"))
            RESPEncoder.appendDecimal(argumentCount, to: &bytes)
        }

        public mutating func append(_ argument: [UInt8]) {
            append(argument[...])
        }

        public mutating func append(_ argument: ArraySlice<UInt8>) {
            begin(length: argument.count)
            bytes.append(contentsOf: argument)
            end()
        }

        public mutating func append(_ argument: String) {
            begin(length: argument.utf8.count)
            bytes.append(contentsOf: argument.utf8)
            end()
        }

        /// One argument made of `first` followed by `second` (a key prefix and an id).
        public mutating func append(_ first: String, _ second: String) {
            begin(length: first.utf8.count + second.utf8.count)
            bytes.append(contentsOf: first.utf8)
            bytes.append(contentsOf: second.utf8)
            end()
        }

        /// A decimal integer, as `Int64.redisBytes` writes it.
        public mutating func append(_ value: Int64) {
            DecimalText.withBytes(of: value) { digits in
                begin(length: digits.count)
                bytes.append(contentsOf: digits)
                end()
            }
        }

        private mutating func begin(length: Int) {
            precondition(remaining > 0, "EncodedRedisCommand: more arguments than announced")
            remaining -= 1
            bytes.append(UInt8(ascii: "$"))
            RESPEncoder.appendDecimal(length, to: &bytes)
        }

        private mutating func end() {
            bytes.append(0x0d)
            bytes.append(0x0a)
        }
    }
}
