import CMicroHTTPD
import CShims
import Foundation
import Synchronization

/// One request's state between libmicrohttpd's calls of the access handler.
/// Retained into `con_cls` on the first call, released by the completion callback.
final class HTTPRequestContext: Sendable {
    let head: HTTPRequestHead
    let bodyLimit: Int
    /// Touched only by the daemon thread that owns the connection, until dispatch.
    nonisolated(unsafe) var body: [UInt8] = []
    /// What `body` holds of the server's body memory: its capacity, reserved ahead
    /// (`HTTPServer.reserveBodyCapacity`), so the budget counts the memory really held,
    /// not only the bytes received.
    nonisolated(unsafe) var reservedBodyBytes = 0
    /// When the head arrived: a body still arriving `bodyTimeout` later is cut off.
    let startedAt: ContinuousClock.Instant
    /// When a chunked body last delivered bytes (the head's arrival before any).
    nonisolated(unsafe) var lastBodyAt: ContinuousClock.Instant
    nonisolated(unsafe) var bodyTooLarge = false
    /// Bytes of a body over its limit read and dropped so far.
    nonisolated(unsafe) var droppedBodyBytes = 0
    /// Answered before its body's end: the answer closes the connection.
    nonisolated(unsafe) var answeredEarly = false
    /// The server's body memory ran out while this body arrived: it is dropped and
    /// the request answered `unavailable`.
    nonisolated(unsafe) var bodyOverMemory = false
    /// The answer for a head over the server's limit, set on the first call; the
    /// body is then dropped as it arrives.
    nonisolated(unsafe) var headRejection: HTTPResponse?
    /// Written by the handler's task, read by the daemon thread after resume.
    let response = Mutex<HTTPResponse?>(nil)

    /// `Content-Length`, when the request declares one.
    let declaredBodyLength: Int?

    init(head: HTTPRequestHead, bodyLimit: Int) {
        self.head = head
        self.bodyLimit = bodyLimit
        startedAt = .now
        lastBodyAt = startedAt
        declaredBodyLength = head.headers["Content-Length"].flatMap(HTTPRequestHead.contentLength)
    }
}

/// Runs once per request: the first call (headers read) creates the context, the
/// following calls deliver body chunks, the last (no data) dispatches the handler
/// on a suspended connection, and the call after resume queues the response.
let httpServerAccess: MHD_AccessHandlerCallback = {
    cls, connection, url, method, version, uploadData, uploadSize, conCls in
    guard let cls, let connection, let conCls, let uploadSize else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    server.driver?.noteProgress()

    guard let existing = conCls.pointee else {
        let head = HTTPRequestHead(
            method: method.map { String(cString: $0) } ?? "",
            path: url.map { HTTPRequestHead.originForm(of: String(cString: $0)) } ?? "/",
            query: connectionValues(connection, kind: .GET_ARGUMENT_KIND),
            headers: HTTPHeaders(connectionValues(connection, kind: .HEADER_KIND)),
            peerAddress: peerAddress(connection))
        let limit = server.handler.maximumBodySize(for: head)
        let context = HTTPRequestContext(head: head, bodyLimit: limit)
        if let declared = context.declaredBodyLength, declared > limit {
            context.bodyTooLarge = true
        }
        server.inFlight.add(1, ordering: .relaxed)
        conCls.pointee = Unmanaged.passRetained(context).toOpaque()
        if let driver = server.driver, context.declaredBodyLength == nil, head.headers["Transfer-Encoding"] != nil {
            driver.uploads.began(context, on: connection)
        }
        let httpVersion = version.map { String(cString: $0) } ?? ""
        let configuration = server.configuration
        if let rejection = head.rejection(
            limit: configuration.headerLimit, memoryLimit: configuration.headerMemoryLimit, version: httpVersion)
        {
            let response = server.handler.rejected(head, rejection)
            if rejection.closesConnection || (context.declaredBodyLength ?? 0) > configuration.oversizedBodyDrain {
                return queue(response, on: connection, server: server, closing: true)
            }
            // As below: a client waiting for "100 Continue" is answered at once.
            if head.headers["Expect"]?.caseInsensitiveEquals("100-continue") == true {
                return queue(response, on: connection, server: server)
            }
            context.headRejection = response
            return .YES
        }
        // A client that waits for "100 Continue" before sending a body declared over
        // the limit is answered now: libmicrohttpd sends no "100 Continue" once a
        // response is queued, and closes instead of reading the body. So is one that
        // declares far more than the limit (at its body's first bytes: libmicrohttpd
        // asks the handler again only when some arrive), and the connection closed.
        // (A client that sends a body a little too large at once has it read and
        // dropped first: closing with it unread could reset the connection before the
        // answer arrives.)
        if context.bodyTooLarge,
            head.headers["Expect"]?.caseInsensitiveEquals("100-continue") == true
                || (context.declaredBodyLength ?? 0) - limit > configuration.oversizedBodyDrain
        {
            context.answeredEarly = true
            return dispatch(HTTPRequest(head: head, body: []), of: context, on: connection, server: server)
        }
        return .YES
    }
    let context = Unmanaged<HTTPRequestContext>.fromOpaque(existing).takeUnretainedValue()

    if let response = context.response.withLock({ $0 }) {
        uploadSize.pointee = 0  // the rest of a body answered early: dropped
        return queue(response, on: connection, server: server, closing: context.answeredEarly)
    }
    if uploadSize.pointee > 0 {
        // A body that trickles in (a byte now and then, never idle long enough for the
        // connection timeout) would hold its memory indefinitely: its connection is
        // closed, unanswered, once the whole body has taken `bodyTimeout`.
        if ContinuousClock.now - context.startedAt > server.configuration.bodyTimeout {
            server.releaseBody(of: context)
            return .NO
        }
        let size = uploadSize.pointee
        // Only a chunked upload is watched for stalls (`ChunkedUploads`): no clock read per push.
        if context.declaredBodyLength == nil { context.lastBodyAt = .now }
        let dropping = context.bodyTooLarge || context.bodyOverMemory || context.headRejection != nil
        if !dropping {
            let needed = context.body.count + size
            if needed > context.bodyLimit {
                context.bodyTooLarge = true
                server.releaseBody(of: context)
            } else if needed > context.reservedBodyBytes && !server.reserveBodyCapacity(needed, for: context) {
                context.bodyOverMemory = true
                server.releaseBody(of: context)
            } else if let uploadData {
                uploadData.withMemoryRebound(to: UInt8.self, capacity: size) {
                    context.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size))
                }
            }
        }
        uploadSize.pointee = 0  // consumed (or discarded past the limit, never buffered)
        if dropping {
            // A chunked body that goes on far past its limit has its connection closed
            // unanswered: libmicrohttpd takes no answer in the middle of one. (A declared
            // one that long was answered at its head or its first bytes.)
            context.droppedBodyBytes += size
            if context.declaredBodyLength == nil && context.droppedBodyBytes > server.configuration.oversizedBodyDrain {
                server.releaseBody(of: context)
                return .NO
            }
        }
        return .YES
    }
    if let rejection = context.headRejection { return queue(rejection, on: connection, server: server) }
    if context.bodyOverMemory { return queue(server.handler.unavailable(context.head), on: connection, server: server) }
    let request = HTTPRequest(head: context.head, body: context.body)
    server.releaseBody(of: context)
    return dispatch(request, of: context, on: connection, server: server)
}

/// Hands `request` to the handler on a suspended connection (`handleOversized` when
/// its body was over the limit); the call after the resume queues the response.
private func dispatch(
    _ request: HTTPRequest, of context: HTTPRequestContext, on connection: OpaquePointer, server: HTTPServer
) -> MHD_Result {
    let handler = server.handler
    let oversized = context.bodyTooLarge
    server.driver?.uploads.ended(context)
    server.driver?.uploads.restoreTimeout(of: connection, timeoutSeconds: server.configuration.connectionTimeoutSeconds)
    guard server.suspended.suspend(connection, context: context) else {
        return queue(handler.unavailable(context.head), on: connection, server: server)
    }
    let suspended = SuspendedConnection(connection)
    let driver = server.driver
    let waiting = server.suspended
    let respond: @Sendable (HTTPResponse) -> Void = { response in
        context.response.withLock { $0 = response }
        if waiting.resume(suspended.pointer) { driver?.connectionResumed() }
    }
    if oversized {
        Task { respond(await handler.handleOversized(request.head)) }
    } else {
        handler.handle(request, respond: respond)
    }
    return .YES
}

/// Releases the request's context once libmicrohttpd is done with the request.
let httpServerCompleted: MHD_RequestCompletedCallback = { cls, connection, conCls, termination in
    guard let cls, let conCls, let pointer = conCls.pointee else { return }
    conCls.pointee = nil
    let context = Unmanaged<HTTPRequestContext>.fromOpaque(pointer)
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    server.driver?.noteProgress()
    server.driver?.uploads.ended(context.takeUnretainedValue())
    if let connection, termination == .REQUEST_TERMINATED_COMPLETED_OK {
        server.driver?.uploads.restoreTimeout(
            of: connection, timeoutSeconds: server.configuration.connectionTimeoutSeconds)
    }
    // A request that ended before its body was dispatched (the client went away).
    server.releaseBody(of: context.takeUnretainedValue())
    context.release()
    server.inFlight.subtract(1, ordering: .releasing)
}

/// Counts the server's open connections.
let httpServerConnection: MHD_NotifyConnectionCallback = { cls, connection, _, event in
    guard let cls else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    server.driver?.noteProgress()
    switch event {
    case .CONNECTION_NOTIFY_STARTED: server.connections.add(1, ordering: .relaxed)
    case .CONNECTION_NOTIFY_CLOSED:
        server.connections.subtract(1, ordering: .relaxed)
        if let connection { server.driver?.uploads.connectionClosed(connection) }
    default: break
    }
}

/// libmicrohttpd's own error messages. Those about one connection (a client that
/// went away, a malformed request) are routine and any client can cause them: debug
/// level. The rest (epoll, accept, memory, the connection limit) are warnings, at most
/// one per 5 s. Either way the request's path is left out: a push URL is a capability.
let httpServerLog: pg_shim_mhd_log_fn = { cls, message in
    guard let cls, let message else { return }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    let text = HTTPServerLogText.redacted(String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines))
    if HTTPServerLogText.isAboutOneConnection(text) {
        server.logger.debug("libmicrohttpd: \(text)")
    } else {
        server.libraryLog.warning("libmicrohttpd: \(text)")
    }
}

/// libmicrohttpd's messages made fit for the log.
enum HTTPServerLogText {
    /// Whether `text` is about one connection or request rather than the server.
    static func isAboutOneConnection(_ text: String) -> Bool {
        text.contains("request for") || text.contains("when reading request")
            || text.hasPrefix("Error processing request") || text.hasPrefix("Failed to parse")
            || text.hasPrefix("Not enough memory in pool") || text.contains("failed to create response header")
            || text.contains("closed by remote side") || text.hasPrefix("Too large value of")
            || text.hasPrefix("Application reported internal error")  // a connection the handler closes
    }

    /// `text` with the request path it quotes (`request for `/api/push/p/…'`, or
    /// `request for /…`) replaced by `<path>`, and without a bind failure's port 0.
    static func redacted(_ text: String) -> String {
        // Given the address as a `sockaddr`, libmicrohttpd names its port argument, 0,
        // in a bind failure; the error that follows names the address.
        let bindFailure = "Failed to bind to port 0: "
        if text.hasPrefix(bindFailure) { return "Failed to bind: " + text.dropFirst(bindFailure.count) }
        guard let marker = text.range(of: "request for ") else { return text }
        let rest = text[marker.upperBound...]
        if rest.hasPrefix("`"), let close = rest.dropFirst().firstIndex(of: "'") {
            return text[..<marker.upperBound] + "`<path>'" + text[text.index(after: close)...]
        }
        let end = rest.firstIndex(where: { $0 == " " }) ?? rest.endIndex
        let path = rest[..<end]
        let kept = path.hasSuffix(".") ? "." : ""
        return text[..<marker.upperBound] + "<path>" + kept + text[end...]
    }
}

/// A suspended connection handed to the task that will resume it. libmicrohttpd
/// documents `MHD_resume_connection` as callable from any thread, and the
/// connection stays valid while suspended.
private struct SuspendedConnection: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

/// With `closing`, and while the server drains (`HTTPServer.shutdown`), the answer says
/// `Connection: close` and libmicrohttpd closes after it: during the drain keep-alive
/// clients take their last answer and go, and requests in flight reach zero instead
/// of new ones arriving on open connections.
private func queue(
    _ response: HTTPResponse, on connection: OpaquePointer, server: HTTPServer, closing: Bool = false
) -> MHD_Result {
    let mhdResponse = response.body.withUnsafeBytes { body in
        MHD_create_response_from_buffer(
            body.count, UnsafeMutableRawPointer(mutating: body.baseAddress), .RESPMEM_MUST_COPY)
    }
    // libmicrohttpd reports a `.NO` only as "Application reported internal error" (a
    // debug line: handlers close connections with it on purpose), so a failure here says so.
    guard let mhdResponse else {
        server.libraryLog.warning("cannot create a response; closing the connection")
        return .NO
    }
    defer { MHD_destroy_response(mhdResponse) }
    // `withCString`, not the implicit conversion: that one builds a C-string array per
    // argument (a heap allocation each), where a native string is passed in place.
    for (name, value) in response.headers {
        _ = name.withCString { name in value.withCString { MHD_add_response_header(mhdResponse, name, $0) } }
    }
    if closing || server.isDraining { _ = MHD_add_response_header(mhdResponse, "Connection", "close") }
    let queued = MHD_queue_response(connection, UInt32(response.status), mhdResponse)
    if queued == .NO { server.libraryLog.warning("libmicrohttpd refused a response; closing the connection") }
    return queued
}

/// The connection's values of one kind, in order. The callback appends to the
/// caller's array through the context pointer: no collector object per request.
/// (libmicrohttpd 0.9.75 cuts a value at a NUL before anyone sees it, with its
/// length too: a NUL in a field value cannot be refused here.)
private func connectionValues(_ connection: OpaquePointer, kind: MHD_ValueKind) -> [(name: String, value: String)] {
    var values: [(name: String, value: String)] = []
    withUnsafeMutablePointer(to: &values) { pointer in
        _ = MHD_get_connection_values(
            connection, kind,
            { cls, _, key, value in
                guard let cls, let key else { return .YES }
                let values = cls.assumingMemoryBound(to: [(name: String, value: String)].self)
                if values.pointee.isEmpty { values.pointee.reserveCapacity(16) }
                values.pointee.append((String(cString: key), value.map { String(cString: $0) } ?? ""))
                return .YES
            }, pointer)
    }
    return values
}

private func peerAddress(_ connection: OpaquePointer) -> [UInt8] {
    guard let address = pg_shim_mhd_client_address(connection) else { return [] }
    switch Int32(address.pointee.sa_family) {
    case AF_INET:
        return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
            withUnsafeBytes(of: pointer.pointee.sin_addr) { Array($0) }
        }
    case AF_INET6:
        let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
            withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
        }
        // An IPv4 client of a dual-stack socket (`::ffff:a.b.c.d`) is that IPv4
        // address, for whoever reads the peer.
        return CIDR.isIPv4Mapped(bytes) ? Array(bytes[12...]) : bytes
    default:
        return []
    }
}
