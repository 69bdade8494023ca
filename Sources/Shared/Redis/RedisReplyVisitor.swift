import CHiredis

/// Receives a reply element by element while hiredis parses it, instead of a
/// reply tree: for large replies on a hot path (a batch of stream entries), whose
/// reader copies out only what it keeps, with no allocation per element.
///
/// `depth` is 0 for the reply itself, 1 for its elements, and so on; `index` is
/// the element's position in its array (0 at depth 0). Elements arrive in order,
/// an array before its elements. Used by one `RedisConnection.send(_:timeout:visitor:)`
/// at a time, on the connection's queue.
public protocol RedisReplyVisitor: AnyObject, Sendable {
    func visitArray(depth: Int, index: Int, count: Int)
    /// A bulk string; `bytes` are valid only during the call.
    func visitBulk(depth: Int, index: Int, bytes: UnsafeRawBufferPointer)
    func visitInteger(depth: Int, index: Int, value: Int64)
    /// A null bulk string or array.
    func visitNull(depth: Int, index: Int)
    /// A status reply, or an error reply nested in an array (an error reply at depth 0
    /// is thrown by `send` instead).
    func visitStatus(depth: Int, index: Int, text: UnsafeRawBufferPointer)
}

/// hiredis's reader calls these instead of building `redisReply` objects; each
/// returns a placeholder (hiredis only checks it is not NULL and hands it back as
/// the reply, which nobody frees). The visitor comes from the root task's
/// `privdata`, set by `RedisConnection` for the one read.
enum RedisVisitingReader {
    /// What a read collects besides what the visitor keeps: a top-level error reply.
    final class Session {
        /// A strong `let`: read through the borrowed session it is borrowed too, where an
        /// `unowned(unsafe)` one was retained and released around every element's call.
        let visitor: any RedisReplyVisitor
        var error: String?

        init(visitor: any RedisReplyVisitor) { self.visitor = visitor }
    }

    /// Never written after it is built, which is what makes `nonisolated(unsafe)` safe.
    nonisolated(unsafe) static let functions: UnsafeMutablePointer<redisReplyObjectFunctions> = {
        let functions = UnsafeMutablePointer<redisReplyObjectFunctions>.allocate(capacity: 1)
        functions.initialize(
            to: redisReplyObjectFunctions(
                createString: visitString, createArray: visitArray, createInteger: visitInteger, createNil: visitNil,
                freeObject: { _ in }))
        return functions
    }()

    /// Never dereferenced.
    nonisolated(unsafe) static let placeholder = UnsafeMutableRawPointer(bitPattern: 1)!

    /// Runs `body` with the session, depth and index of `task`. The session is
    /// borrowed, not retained: `RedisConnection` keeps it alive for the whole read,
    /// and a retain/release pair per element was a visible share of reading a batch.
    static func visit(
        _ task: UnsafePointer<redisReadTask>, _ body: (Session, _ depth: Int, _ index: Int) -> Void
    ) {
        var depth = 0
        var root = task
        while let parent = root.pointee.parent {
            depth += 1
            root = UnsafePointer(parent)
        }
        let index = max(Int(task.pointee.idx), 0)
        Unmanaged<Session>.fromOpaque(root.pointee.privdata!)._withUnsafeGuaranteedRef { session in
            body(session, depth, index)
        }
    }
}

private func visitString(
    _ task: UnsafePointer<redisReadTask>?, _ text: UnsafeMutablePointer<CChar>?, _ length: Int
) -> UnsafeMutableRawPointer? {
    guard let task else { return nil }
    let bytes = UnsafeRawBufferPointer(start: text, count: text == nil ? 0 : length)
    let type = task.pointee.type
    RedisVisitingReader.visit(task) { session, depth, index in
        switch type {
        case REDIS_REPLY_STRING: session.visitor.visitBulk(depth: depth, index: index, bytes: bytes)
        case REDIS_REPLY_ERROR where depth == 0: session.error = String(decoding: bytes, as: UTF8.self)
        default: session.visitor.visitStatus(depth: depth, index: index, text: bytes)
        }
    }
    return RedisVisitingReader.placeholder
}

private func visitArray(_ task: UnsafePointer<redisReadTask>?, _ count: Int32) -> UnsafeMutableRawPointer? {
    guard let task else { return nil }
    RedisVisitingReader.visit(task) { session, depth, index in
        session.visitor.visitArray(depth: depth, index: index, count: Int(count))
    }
    return RedisVisitingReader.placeholder
}

private func visitInteger(_ task: UnsafePointer<redisReadTask>?, _ value: Int64) -> UnsafeMutableRawPointer? {
    guard let task else { return nil }
    RedisVisitingReader.visit(task) { session, depth, index in
        session.visitor.visitInteger(depth: depth, index: index, value: value)
    }
    return RedisVisitingReader.placeholder
}

private func visitNil(_ task: UnsafePointer<redisReadTask>?) -> UnsafeMutableRawPointer? {
    guard let task else { return nil }
    RedisVisitingReader.visit(task) { session, depth, index in
        session.visitor.visitNull(depth: depth, index: index)
    }
    return RedisVisitingReader.placeholder
}
