import Foundation
import Synchronization

/// A small structured logger: one JSON object per line on stderr.
///
/// Messages are built lazily (below the minimum level nothing is formatted).
/// Never pass secrets, full device tokens or payloads as messages or metadata;
/// use `Redact` for values that identify a device.
public struct Logger: Sendable {
    public enum Level: Int, Sendable, Comparable, CaseIterable {
        case debug, info, notice, warning, error

        public var name: String {
            switch self {
            case .debug: "debug"
            case .info: "info"
            case .notice: "notice"
            case .warning: "warning"
            case .error: "error"
            }
        }

        public init?(name: String) {
            guard let level = Self.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
            self = level
        }

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    public typealias Metadata = [String: String]

    /// The component that logs (`ingress`, `worker`, `postgres`…), written as `component`.
    public let component: String
    public let minimumLevel: Level
    public private(set) var metadata: Metadata
    private let sink: LogSink

    public init(
        component: String, minimumLevel: Level = .info, metadata: Metadata = [:], sink: LogSink = .standardError
    ) {
        self.component = component
        self.minimumLevel = minimumLevel
        self.metadata = metadata
        self.sink = sink
    }

    /// The same logger for a sub-component, e.g. `postgres` under `ingress`.
    public func child(_ component: String, metadata extra: Metadata = [:]) -> Logger {
        Logger(
            component: "\(self.component).\(component)", minimumLevel: minimumLevel,
            metadata: metadata.merging(extra) { _, new in new }, sink: sink)
    }

    public func log(
        _ level: Level, _ message: @autoclosure () -> String, metadata extra: @autoclosure () -> Metadata = [:]
    ) {
        guard level >= minimumLevel else { return }
        var fields = metadata.merging(extra()) { _, new in new }
        fields["level"] = level.name
        fields["time"] = Self.timestamp()
        fields["component"] = component
        fields["message"] = message()
        sink.write(Self.jsonLine(fields))
    }

    public func debug(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        log(.debug, message(), metadata: metadata())
    }
    public func info(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        log(.info, message(), metadata: metadata())
    }
    public func notice(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        log(.notice, message(), metadata: metadata())
    }
    public func warning(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        log(.warning, message(), metadata: metadata())
    }
    public func error(_ message: @autoclosure () -> String, metadata: @autoclosure () -> Metadata = [:]) {
        log(.error, message(), metadata: metadata())
    }

    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let millis = now.tv_nsec / 1_000_000
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec, millis)
    }

    /// Stable key order (level, time, component, message, then the rest sorted) for readable lines.
    static func jsonLine(_ fields: Metadata) -> String {
        let leading = ["level", "time", "component", "message"]
        let keys = leading.filter { fields[$0] != nil } + fields.keys.filter { !leading.contains($0) }.sorted()
        var line = "{"
        for (index, key) in keys.enumerated() {
            if index > 0 { line += "," }
            line += JSONString.quote(key) + ":" + JSONString.quote(fields[key]!)
        }
        return line + "}\n"
    }
}

/// Where log lines go. Each line is written with one `write(2)` so lines from
/// concurrent threads never interleave.
public struct LogSink: Sendable {
    private let writeLine: @Sendable (String) -> Void

    public init(_ writeLine: @escaping @Sendable (String) -> Void) { self.writeLine = writeLine }

    public static let standardError = LogSink { line in
        var bytes = Array(line.utf8)
        bytes.withUnsafeMutableBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                if written <= 0 { return }
                offset += written
            }
        }
    }

    /// Collects lines in memory; for tests that check what was (not) logged.
    public static func capturing(into lines: CapturedLogLines) -> LogSink {
        LogSink { lines.append($0) }
    }

    func write(_ line: String) { writeLine(line) }
}

/// Thread-safe store of captured log lines.
public final class CapturedLogLines: Sendable {
    private let storage = Mutex<[String]>([])
    public init() {}
    public func append(_ line: String) { storage.withLock { $0.append(line) } }
    public var all: [String] { storage.withLock { $0 } }
}

/// Values that may identify a device or secret, shortened for logs.
public enum Redact {
    /// The first 8 characters and the length: enough to correlate, too little to use.
    public static func token(_ value: String) -> String {
        "\(value.prefix(8))…(\(value.count))"
    }
}

/// JSON string literals (RFC 8259), shared by the logger, response writers and the
/// worker's notification payloads: quotes, backslashes and control characters
/// escaped, everything else (UTF-8 included) as it is.
public enum JSONString {
    public static func quote(_ string: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(string.utf8.count + 2)
        append(string, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `text` as a JSON string literal, quotes included.
    public static func append(_ text: String, to bytes: inout [UInt8]) {
        let hex: StaticString = "0123456789abcdef"  // no array built per call: this runs per message
        bytes.append(UInt8(ascii: "\""))
        // Text rarely needs escaping: then one copy instead of a byte-by-byte walk.
        var text = text
        let copied = text.withUTF8 { utf8 in
            guard !utf8.contains(where: needsEscape) else { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if copied { return bytes.append(UInt8(ascii: "\"")) }
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): bytes.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): bytes.append(contentsOf: #"\\"#.utf8)
            case 0x0A: bytes.append(contentsOf: #"\n"#.utf8)
            case 0x0D: bytes.append(contentsOf: #"\r"#.utf8)
            case 0x09: bytes.append(contentsOf: #"\t"#.utf8)
            case 0..<0x20, 0x7F:
                bytes.append(contentsOf: #"\u00"#.utf8)
                bytes.append(hex.utf8Start[Int(byte >> 4)])
                bytes.append(hex.utf8Start[Int(byte & 0x0F)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// `append` of stored UTF-8 bytes: plain ASCII is copied as it is; anything else
    /// goes through the `String` it reads as (invalid UTF-8 repaired). Inlinable: the
    /// worker writes two per notification, and the usual one is a plain copy.
    @inlinable
    public static func append(utf8 text: ArraySlice<UInt8>, to bytes: inout [UInt8]) {
        guard text.allSatisfy({ $0 < 0x80 && !needsEscape($0) }) else {
            return append(String(decoding: text, as: UTF8.self), to: &bytes)
        }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: text)
        bytes.append(UInt8(ascii: "\""))
    }

    @usableFromInline
    static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }
}
