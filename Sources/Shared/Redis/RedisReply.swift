/// One RESP2 reply, copied out of hiredis (the C reply is freed right away).
///
/// Error replies inside a pipeline (or nested in an `EXEC` array) are values,
/// `.error`, so one failing command does not hide the others' replies; a single
/// command sent with `send` throws its error instead.
public enum RedisReply: Sendable, Equatable {
    case status(String)
    case error(RedisError)
    case integer(Int64)
    case bulk([UInt8])
    case null
    case array([RedisReply])

    /// The integer of an `.integer` reply, or of a `.bulk`/`.status` holding a decimal integer.
    public var int: Int64? {
        switch self {
        case .integer(let value): value
        case .bulk(let bytes): Int64(String(decoding: bytes, as: UTF8.self))
        case .status(let text): Int64(text)
        default: nil
        }
    }

    /// The text of a `.status` reply, or of a `.bulk` reply that is valid UTF-8.
    public var string: String? {
        switch self {
        case .status(let text): text
        case .bulk(let bytes): String(validating: bytes, as: UTF8.self)
        default: nil
        }
    }

    /// The bytes of a `.bulk` reply (or the UTF-8 of a `.status`).
    public var bytes: [UInt8]? {
        switch self {
        case .bulk(let bytes): bytes
        case .status(let text): Array(text.utf8)
        default: nil
        }
    }

    /// The elements of an `.array` reply.
    public var array: [RedisReply]? {
        if case .array(let elements) = self { return elements }
        return nil
    }

    /// The error of an `.error` reply.
    public var error: RedisError? {
        if case .error(let error) = self { return error }
        return nil
    }

    public var isNull: Bool { self == .null }

    /// An error reply of a read-only replica (`READONLY`), or an array holding one (a
    /// script answers per item): the connection reaches a replica, not the primary —
    /// after a failover, the endpoint's former primary. Connections give themselves
    /// up on it, so the next one reaches whatever primary the endpoint names now.
    public var isFromReadOnlyReplica: Bool {
        switch self {
        case .error(let error): error.serverPrefix == "READONLY"
        case .array(let elements): elements.contains { $0.error?.serverPrefix == "READONLY" }
        default: false
        }
    }

    /// The reply itself, or its error thrown.
    public func throwingError() throws(RedisError) -> RedisReply {
        if case .error(let error) = self { throw error }
        return self
    }
}
