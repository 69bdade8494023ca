import Foundation

/// A Postgres type OID. Open: any OID can be named; the common ones have constants.
public struct PostgresDataType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Lets the server infer the type from context (sent in text format).
    public static let unspecified = Self(rawValue: 0)
    public static let bool = Self(rawValue: 16)
    public static let bytea = Self(rawValue: 17)
    public static let name = Self(rawValue: 19)
    public static let int8 = Self(rawValue: 20)
    public static let int2 = Self(rawValue: 21)
    public static let int4 = Self(rawValue: 23)
    public static let text = Self(rawValue: 25)
    public static let oid = Self(rawValue: 26)
    public static let json = Self(rawValue: 114)
    public static let float4 = Self(rawValue: 700)
    public static let float8 = Self(rawValue: 701)
    public static let unknown = Self(rawValue: 705)
    public static let bpchar = Self(rawValue: 1042)
    public static let varchar = Self(rawValue: 1043)
    public static let date = Self(rawValue: 1082)
    public static let timestamp = Self(rawValue: 1114)
    public static let timestamptz = Self(rawValue: 1184)
    public static let uuid = Self(rawValue: 2950)
    public static let jsonb = Self(rawValue: 3802)
    public static let textArray = Self(rawValue: 1009)
    public static let varcharArray = Self(rawValue: 1015)

    /// Types whose binary form is their UTF-8 text.
    var isTextual: Bool {
        [.text, .varchar, .bpchar, .name, .json, .unknown].contains(self)
    }

    public var description: String { "oid \(rawValue)" }
}

/// One value as it travels to or from the server: its type, wire format and
/// bytes (nil for SQL NULL).
public struct PostgresData: Sendable, Equatable {
    public enum Format: Int32, Sendable {
        case text = 0
        case binary = 1
    }

    public var type: PostgresDataType
    public var format: Format
    public var bytes: [UInt8]?

    public init(type: PostgresDataType, format: Format, bytes: [UInt8]?) {
        self.type = type
        self.format = format
        self.bytes = bytes
    }

    public static func null(_ type: PostgresDataType) -> PostgresData {
        PostgresData(type: type, format: .binary, bytes: nil)
    }
}

/// A Swift value that can be bound as a query parameter.
public protocol PostgresEncodable: Sendable {
    /// The parameter type announced to the server (also used for NULLs of this type).
    static var postgresType: PostgresDataType { get }
    var postgresData: PostgresData { get }
}

/// A Swift value that a result column can be decoded into. Results always arrive
/// in binary format. `Optional` decodes SQL NULL as nil; other types reject it.
public protocol PostgresDecodable: Sendable {
    static func decode(from cell: PostgresCell) throws -> Self
}

/// One cell of a result row, handed to `PostgresDecodable.decode(from:)`.
public struct PostgresCell: Sendable {
    public let bytes: [UInt8]?
    public let type: PostgresDataType
    public let column: String

    /// The non-NULL bytes, or a decoding error naming the column.
    public func requireBytes<T>(for target: T.Type) throws -> [UInt8] {
        guard let bytes else {
            throw PostgresError(code: .decoding, message: "column \"\(column)\" is NULL; decode as \(T.self)? instead")
        }
        return bytes
    }

    public func mismatch<T>(_ target: T.Type) -> PostgresError {
        PostgresError(code: .decoding, message: "column \"\(column)\" (\(type)) cannot be decoded as \(T.self)")
    }
}

// MARK: - Big-endian helpers

extension FixedWidthInteger {
    fileprivate var bigEndianBytes: [UInt8] {
        withUnsafeBytes(of: self.bigEndian) { Array($0) }
    }

    fileprivate init?(bigEndianBytes bytes: some Collection<UInt8>) {
        guard bytes.count == MemoryLayout<Self>.size else { return nil }
        var value = Self.zero
        for byte in bytes { value = (value << 8) | Self(truncatingIfNeeded: byte) }
        self = value
    }
}

/// Decodes any of int2/int4/int8 and narrows it, failing if it does not fit.
private func decodeInteger<T: FixedWidthInteger>(_ cell: PostgresCell, as target: T.Type) throws -> T {
    let bytes = try cell.requireBytes(for: T.self)
    let wide: Int64?
    switch cell.type {
    case .int2: wide = Int16(bigEndianBytes: bytes).map(Int64.init)
    case .int4: wide = Int32(bigEndianBytes: bytes).map(Int64.init)
    case .int8: wide = Int64(bigEndianBytes: bytes)
    case .oid: wide = UInt32(bigEndianBytes: bytes).map(Int64.init)
    default: throw cell.mismatch(T.self)
    }
    guard let wide, let value = T(exactly: wide) else {
        throw PostgresError(code: .decoding, message: "column \"\(cell.column)\" does not fit in \(T.self)")
    }
    return value
}

// MARK: - Conformances

extension String: PostgresEncodable, PostgresDecodable {
    /// Sent as text of unspecified type, so the server parses it as whatever the
    /// context needs (text, jsonb, timestamptz, an enum…).
    public static var postgresType: PostgresDataType { .unspecified }
    public var postgresData: PostgresData { PostgresData(type: .unspecified, format: .text, bytes: Array(utf8)) }

    public static func decode(from cell: PostgresCell) throws -> String {
        var bytes = try cell.requireBytes(for: String.self)
        if cell.type == .jsonb {
            guard bytes.first == 1 else { throw cell.mismatch(String.self) }
            bytes.removeFirst()
        } else if !cell.type.isTextual {
            throw cell.mismatch(String.self)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension Int16: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .int2 }
    public var postgresData: PostgresData { PostgresData(type: .int2, format: .binary, bytes: bigEndianBytes) }
    public static func decode(from cell: PostgresCell) throws -> Int16 { try decodeInteger(cell, as: Int16.self) }
}

extension Int32: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .int4 }
    public var postgresData: PostgresData { PostgresData(type: .int4, format: .binary, bytes: bigEndianBytes) }
    public static func decode(from cell: PostgresCell) throws -> Int32 { try decodeInteger(cell, as: Int32.self) }
}

extension Int64: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .int8 }
    public var postgresData: PostgresData { PostgresData(type: .int8, format: .binary, bytes: bigEndianBytes) }
    public static func decode(from cell: PostgresCell) throws -> Int64 { try decodeInteger(cell, as: Int64.self) }
}

extension Int: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .int8 }
    public var postgresData: PostgresData { Int64(self).postgresData }
    public static func decode(from cell: PostgresCell) throws -> Int { try decodeInteger(cell, as: Int.self) }
}

extension Bool: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .bool }
    public var postgresData: PostgresData { PostgresData(type: .bool, format: .binary, bytes: [self ? 1 : 0]) }
    public static func decode(from cell: PostgresCell) throws -> Bool {
        let bytes = try cell.requireBytes(for: Bool.self)
        guard cell.type == .bool, bytes.count == 1 else { throw cell.mismatch(Bool.self) }
        return bytes[0] != 0
    }
}

extension Double: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .float8 }
    public var postgresData: PostgresData {
        PostgresData(type: .float8, format: .binary, bytes: bitPattern.bigEndianBytes)
    }
    public static func decode(from cell: PostgresCell) throws -> Double {
        let bytes = try cell.requireBytes(for: Double.self)
        switch cell.type {
        case .float8:
            guard let bits = UInt64(bigEndianBytes: bytes) else { throw cell.mismatch(Double.self) }
            return Double(bitPattern: bits)
        case .float4:
            guard let bits = UInt32(bigEndianBytes: bytes) else { throw cell.mismatch(Double.self) }
            return Double(Float(bitPattern: bits))
        case .int2, .int4, .int8:
            return Double(try decodeInteger(cell, as: Int64.self))
        default:
            throw cell.mismatch(Double.self)
        }
    }
}

/// `timestamptz`: microseconds since 2000-01-01 00:00:00 UTC on the wire.
extension Date: PostgresEncodable, PostgresDecodable {
    static let postgresEpoch = Date(timeIntervalSince1970: 946_684_800)

    public static var postgresType: PostgresDataType { .timestamptz }
    public var postgresData: PostgresData {
        let micros = (timeIntervalSince(Date.postgresEpoch) * 1_000_000).rounded()
        return PostgresData(type: .timestamptz, format: .binary, bytes: Int64(micros).bigEndianBytes)
    }

    public static func decode(from cell: PostgresCell) throws -> Date {
        let bytes = try cell.requireBytes(for: Date.self)
        switch cell.type {
        case .timestamptz, .timestamp:
            guard let micros = Int64(bigEndianBytes: bytes) else { throw cell.mismatch(Date.self) }
            if micros == .max { return .distantFuture }
            if micros == .min { return .distantPast }
            // Whole seconds and the remainder separately, to keep microsecond precision.
            let seconds = micros.quotientAndRemainder(dividingBy: 1_000_000)
            return Date(
                timeInterval: TimeInterval(seconds.quotient) + TimeInterval(seconds.remainder) / 1_000_000,
                since: postgresEpoch)
        case .date:
            guard let days = Int32(bigEndianBytes: bytes) else { throw cell.mismatch(Date.self) }
            return Date(timeInterval: TimeInterval(days) * 86_400, since: postgresEpoch)
        default:
            throw cell.mismatch(Date.self)
        }
    }
}

extension UUID: PostgresEncodable, PostgresDecodable {
    public static var postgresType: PostgresDataType { .uuid }
    public var postgresData: PostgresData {
        PostgresData(type: .uuid, format: .binary, bytes: withUnsafeBytes(of: uuid) { Array($0) })
    }
    public static func decode(from cell: PostgresCell) throws -> UUID {
        let bytes = try cell.requireBytes(for: UUID.self)
        guard cell.type == .uuid, bytes.count == 16 else { throw cell.mismatch(UUID.self) }
        var value = UUID().uuid
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes) }
        return UUID(uuid: value)
    }
}

/// Element types whose Swift arrays map onto one Postgres type: `[UInt8]` is `bytea`,
/// `[String]` is `text[]`. (Swift allows one `Array: PostgresEncodable` conformance,
/// so each element type says how its arrays travel.)
public protocol PostgresArrayElement: Sendable {
    static var arrayType: PostgresDataType { get }
    static func encodeArray(_ array: [Self]) -> PostgresData
    static func decodeArray(from cell: PostgresCell) throws -> [Self]
}

extension Array: PostgresEncodable, PostgresDecodable where Element: PostgresArrayElement {
    public static var postgresType: PostgresDataType { Element.arrayType }
    public var postgresData: PostgresData { Element.encodeArray(self) }
    public static func decode(from cell: PostgresCell) throws -> [Element] { try Element.decodeArray(from: cell) }
}

/// `bytea`, sent and received as raw bytes (binary format), so any byte value round-trips.
extension UInt8: PostgresArrayElement {
    public static var arrayType: PostgresDataType { .bytea }
    public static func encodeArray(_ array: [UInt8]) -> PostgresData {
        PostgresData(type: .bytea, format: .binary, bytes: array)
    }
    public static func decodeArray(from cell: PostgresCell) throws -> [UInt8] {
        let bytes = try cell.requireBytes(for: [UInt8].self)
        guard cell.type == .bytea else { throw cell.mismatch([UInt8].self) }
        return bytes
    }
}

/// `text[]` (one dimension), e.g. API key scopes. Elements must not be NULL.
extension String: PostgresArrayElement {
    public static var arrayType: PostgresDataType { .textArray }

    public static func encodeArray(_ array: [String]) -> PostgresData {
        // One buffer of the right size: the worker binds arrays of thousands of ids.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(20 + array.reduce(0) { $0 + 4 + $1.utf8.count })
        func append<Value: FixedWidthInteger>(_ value: Value) {
            withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
        }
        // ndim, has-null flag, element type, then per dimension: size, lower bound.
        append(Int32(array.isEmpty ? 0 : 1))
        append(Int32(0))
        append(PostgresDataType.text.rawValue)
        if !array.isEmpty {
            append(Int32(array.count))
            append(Int32(1))
        }
        for element in array {
            append(Int32(element.utf8.count))
            bytes.append(contentsOf: element.utf8)
        }
        return PostgresData(type: .textArray, format: .binary, bytes: bytes)
    }

    public static func decodeArray(from cell: PostgresCell) throws -> [String] {
        let bytes = try cell.requireBytes(for: [String].self)
        guard cell.type == .textArray || cell.type == .varcharArray else { throw cell.mismatch([String].self) }
        var offset = 0
        func int32() throws -> Int32 {
            guard offset + 4 <= bytes.count, let value = Int32(bigEndianBytes: bytes[offset..<offset + 4]) else {
                throw cell.mismatch([String].self)
            }
            offset += 4
            return value
        }
        let dimensions = try int32()
        _ = try int32()  // has-null flag
        _ = try int32()  // element type
        if dimensions == 0 { return [] }
        guard dimensions == 1 else { throw cell.mismatch([String].self) }
        let count = try int32()
        _ = try int32()  // lower bound
        var result: [String] = []
        result.reserveCapacity(Int(Swift.max(count, 0)))
        for _ in 0..<Swift.max(count, 0) {
            let length = Int(try int32())
            guard length >= 0, offset + length <= bytes.count else {
                throw PostgresError(code: .decoding, message: "column \"\(cell.column)\" has a NULL array element")
            }
            result.append(String(decoding: bytes[offset..<offset + length], as: UTF8.self))
            offset += length
        }
        return result
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(from cell: PostgresCell) throws -> Wrapped? {
        guard cell.bytes != nil else { return nil }
        return try Wrapped.decode(from: cell)
    }
}
