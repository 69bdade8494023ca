import CHiredis

extension RedisReply {
    /// Copies a hiredis reply tree into Swift values (the caller frees the tree).
    /// `command` names the command in an error reply; it is only evaluated for one.
    init(hiredis reply: UnsafeMutablePointer<redisReply>, command: @autoclosure () -> String) {
        let value = reply.pointee
        func bytes() -> [UInt8] {
            guard let text = value.str, value.len > 0 else { return [] }
            return Array(UnsafeRawBufferPointer(start: text, count: value.len))
        }
        switch value.type {
        case REDIS_REPLY_STATUS:
            self = .status(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_ERROR:
            self = .error(RedisError(serverReply: String(decoding: bytes(), as: UTF8.self), command: command()))
        case REDIS_REPLY_INTEGER:
            self = .integer(Int64(value.integer))
        case REDIS_REPLY_STRING:
            self = .bulk(bytes())
        case REDIS_REPLY_NIL:
            self = .null
        case REDIS_REPLY_ARRAY:
            guard let elements = value.element else {
                self = .array([])
                return
            }
            self = .array(
                (0..<value.elements).map { index in
                    elements[index].map { RedisReply(hiredis: $0, command: command()) } ?? .null
                })
        default:
            self = .error(
                RedisError(code: .protocol, message: "unknown reply type \(value.type)", command: command()))
        }
    }
}
