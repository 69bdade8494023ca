import CNGHTTP2
import Foundation

/// A header field as it goes over HTTP/2 (names lower-case).
public struct HTTP2Header: Sendable, Equatable {
    public let name: String
    public let value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

extension [HTTP2Header] {
    public subscript(_ name: String) -> String? { first { $0.name == name }?.value }
}

public struct HTTP2Error: Error, CustomStringConvertible, Equatable {
    public let reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "HTTP/2: \(reason)" }
}

/// Receives an `HTTP2Connection`'s events on its event loop's thread.
public protocol HTTP2ConnectionDelegate: AnyObject {
    /// TLS is up and our connection preface (SETTINGS) is on its way: requests may be sent.
    func connectionDidBecomeReady(_ connection: HTTP2Connection)
    /// A stream's peer finished sending (END_STREAM): for a server a whole request,
    /// for a client a whole response. Implement this or the `fields` variant below.
    func connection(
        _ connection: HTTP2Connection, streamDidFinish streamID: Int32, headers: [HTTP2Header], body: [UInt8])
    /// The same, with the header fields as received bytes: no String per field.
    /// By default passes them on as `HTTP2Header`s to the variant above.
    func connection(
        _ connection: HTTP2Connection, streamDidFinish streamID: Int32, fields: HTTP2ReceivedFields, body: [UInt8])
    /// A stream closed before the peer finished it (RST_STREAM, e.g. REFUSED_STREAM,
    /// or the connection went away). Not called for streams that finished.
    func connection(_ connection: HTTP2Connection, streamWasReset streamID: Int32, errorCode: UInt32)
    /// The peer sent GOAWAY: streams above `lastStreamID` were not processed. The
    /// frame's debug data may say why (APNs puts its `{"reason": …}` there).
    func connection(
        _ connection: HTTP2Connection, didReceiveGoAway lastStreamID: Int32, errorCode: UInt32, debugData: [UInt8])
    /// The peer changed SETTINGS_MAX_CONCURRENT_STREAMS.
    func connection(_ connection: HTTP2Connection, didChangeMaxConcurrentStreams limit: Int)
    func connection(_ connection: HTTP2Connection, didReceivePingAck: Void)
    /// The connection is closed; every stream not finished has been reported reset.
    func connection(_ connection: HTTP2Connection, didCloseWith error: (any Error)?)
}

extension HTTP2ConnectionDelegate {
    public func connection(
        _ connection: HTTP2Connection, streamDidFinish streamID: Int32, headers: [HTTP2Header], body: [UInt8]
    ) {}
    public func connection(
        _ connection: HTTP2Connection, streamDidFinish streamID: Int32, fields: HTTP2ReceivedFields, body: [UInt8]
    ) {
        self.connection(connection, streamDidFinish: streamID, headers: fields.headers, body: body)
    }
    public func connection(_ connection: HTTP2Connection, didChangeMaxConcurrentStreams limit: Int) {}
    public func connection(_ connection: HTTP2Connection, didReceivePingAck: Void) {}
    public func connection(
        _ connection: HTTP2Connection, didReceiveGoAway lastStreamID: Int32, errorCode: UInt32, debugData: [UInt8]
    ) {}
}

/// An HTTP/2 connection (client or server side) on nghttp2 over a `TLSStream`.
///
/// nghttp2 is used without its I/O: bytes read from TLS are fed in with
/// `mem_recv`, and what it wants to send is pulled with `mem_send` and written
/// to TLS. Loop-confined, like the stream under it. Request and response
/// bodies are small (APNs payloads are at most 4 KB), so they are kept whole.
public final class HTTP2Connection: TLSStreamDelegate {
    public enum Role: Sendable { case client, server }

    public let role: Role
    public weak var delegate: (any HTTP2ConnectionDelegate)?
    public private(set) var tls: TLSStream?
    /// Streams the peer lets us open at once (client side); nghttp2's default until its SETTINGS arrive.
    public private(set) var remoteMaxConcurrentStreams = 100
    public private(set) var isClosed = false
    /// Set once either side sent or received GOAWAY: no new streams.
    public private(set) var isGoingAway = false
    /// The only received header fields passed on (names lower-case); nil passes all.
    /// A client that reads a few fields of each response skips building the rest.
    public var keptHeaderNames: [StaticString]?

    fileprivate var session: OpaquePointer?
    /// The session's memory; outlives it (`deinit` deletes the session first).
    private let memory = HTTP2SessionMemory()
    // Looked up in every nghttp2 callback, only on the loop and never during another
    // access: the runtime's exclusivity check is skipped for these (and the states' fields).
    @exclusivity(unchecked) fileprivate var streams: [Int32: StreamState] = [:]
    private var closeError: (any Error)?
    /// True while nghttp2 runs (`mem_recv`/`mem_send`): its callbacks reach our
    /// delegate, which may submit frames, but nghttp2 forbids calling `mem_send` or
    /// `mem_recv` from a callback. A flush asked for meanwhile is done right after.
    private var insideSession = false
    private var flushRequested = false

    fileprivate final class StreamState {
        @exclusivity(unchecked) var fields = HTTP2ReceivedFields()
        @exclusivity(unchecked) var body: [UInt8] = []
        /// What we send on this stream, and how much of it nghttp2 has taken.
        /// A slice: a request's payload lies in its batch's buffer, shared, not copied.
        @exclusivity(unchecked) var outgoing: ArraySlice<UInt8> = []
        var outgoingOffset = 0
        var finished = false

        /// Copies the next piece of the outgoing body into nghttp2's buffer; EOF after the last.
        func copyOutgoing(into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>)
            -> Int
        {
            let count = min(length, outgoing.count - outgoingOffset)
            outgoing.withUnsafeBytes { bytes in
                UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + outgoingOffset, byteCount: count)
            }
            outgoingOffset += count
            if outgoingOffset == outgoing.count {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            }
            return count
        }

        /// Ready for another stream, keeping its arrays' memory where nobody else holds them.
        func reset() {
            fields.removeAll()
            body.removeAll(keepingCapacity: true)
            outgoing = []
            outgoingOffset = 0
            finished = false
        }
    }

    /// States of closed streams, reused for new ones (a stream is short, and there are many).
    @exclusivity(unchecked) private var spareStates: [StreamState] = []

    fileprivate func makeStreamState() -> StreamState { spareStates.popLast() ?? StreamState() }

    /// The stream looked up last: the callbacks of one header block (each field,
    /// then the frame) ask for the same stream in a row. Dropped when it closes.
    private var lastLookedUp: (id: Int32, state: StreamState)?

    /// The open stream `id`'s state.
    fileprivate func state(of id: Int32) -> StreamState? {
        if let lastLookedUp, lastLookedUp.id == id { return lastLookedUp.state }
        guard let state = streams[id] else { return nil }
        lastLookedUp = (id, state)
        return state
    }

    /// `settings` are our SETTINGS (e.g. the server's MAX_CONCURRENT_STREAMS).
    public init(role: Role, settings: [(id: Int32, value: UInt32)] = []) throws(HTTP2Error) {
        self.role = role
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw HTTP2Error("cannot allocate nghttp2 callbacks")
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, onBeginHeaders)
        nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader)
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk)
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameReceived)
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose)
        let userData = Unmanaged.passUnretained(self).toOpaque()
        var session: OpaquePointer?
        var allocator = memory.allocator
        let status =
            role == .client
            ? nghttp2_session_client_new3(&session, callbacks, userData, nil, &allocator)
            : nghttp2_session_server_new3(&session, callbacks, userData, nil, &allocator)
        guard status == 0, let session else { throw HTTP2Error("cannot create nghttp2 session") }
        self.session = session
        var entries = settings.map { nghttp2_settings_entry(settings_id: $0.id, value: $0.value) }
        // Our receive window: responses and requests are small, but many run at once.
        entries.append(
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20))
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), entries, entries.count)
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Attaches the TLS stream this connection runs on; its delegate becomes this connection.
    public func attach(_ stream: TLSStream) {
        tls = stream
        stream.delegate = self
        if stream.isOpen { streamDidConnect(stream) }
    }

    /// Streams open right now (ours and the peer's).
    public var openStreams: Int { streams.count }

    /// Sends a request; returns its stream id. Client side only.
    public func sendRequest(headers: [HTTP2Header], body: [UInt8]) throws(HTTP2Error) -> Int32 {
        try sendRequest(HTTP2HeaderFields(headers), body: body)
    }

    /// Sends a request; returns its stream id. Client side only.
    public func sendRequest(_ fields: HTTP2HeaderFields, body: [UInt8]) throws(HTTP2Error) -> Int32 {
        try sendRequest(fields, body: body[...])
    }

    /// Sends a request whose body is a slice of a larger buffer (kept, not copied,
    /// until it is sent); returns its stream id. Client side only.
    public func sendRequest(_ fields: HTTP2HeaderFields, body: ArraySlice<UInt8>) throws(HTTP2Error) -> Int32 {
        guard let session, !isClosed, !isGoingAway else { throw HTTP2Error("connection is closing") }
        let state = makeStreamState()
        state.outgoing = body
        // nghttp2 copies the provider and the fields; the body stays in `state` until sent.
        let streamID = withDataProvider(reading: state) { provider in
            fields.withNameValues { nva in
                nghttp2_submit_request(session, nil, nva.baseAddress, nva.count, provider, nil)
            }
        }
        guard streamID > 0 else { throw HTTP2Error("cannot submit request: \(errorText(streamID))") }
        streams[streamID] = state
        flushAtEndOfIteration()
        return streamID
    }

    /// Answers a request stream. Server side only.
    public func sendResponse(streamID: Int32, headers: [HTTP2Header], body: [UInt8]) {
        sendResponse(streamID: streamID, fields: HTTP2HeaderFields(headers), body: body)
    }

    /// Answers a request stream with fields the caller may reuse afterwards
    /// (nghttp2 copies them). Server side only.
    public func sendResponse(streamID: Int32, fields: HTTP2HeaderFields, body: [UInt8]) {
        guard let session, let state = streams[streamID] else { return }
        state.outgoing = body[...]
        state.outgoingOffset = 0
        let status = withDataProvider(reading: state) { provider in
            fields.withNameValues { nva in
                nghttp2_submit_response(session, streamID, nva.baseAddress, nva.count, provider)
            }
        }
        if status != 0 {
            nghttp2_submit_rst_stream(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_INTERNAL_ERROR.rawValue)
        }
        flushAtEndOfIteration()
    }

    /// Sends GOAWAY (no new streams; streams up to the last one processed still
    /// finish). With `lastStreamID`, claims only streams up to it were processed.
    public func goAway(
        errorCode: UInt32 = NGHTTP2_NO_ERROR.rawValue, lastStreamID: Int32? = nil, debugData: [UInt8] = []
    ) {
        guard let session, !isClosed else { return }
        isGoingAway = true
        let last = lastStreamID ?? nghttp2_session_get_last_proc_stream_id(session)
        debugData.withUnsafeBufferPointer {
            _ = nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, errorCode, $0.baseAddress, debugData.count)
        }
        flush()
    }

    /// Sends new SETTINGS, e.g. a server raising MAX_CONCURRENT_STREAMS.
    public func updateSettings(_ settings: [(id: Int32, value: UInt32)]) {
        guard let session, !isClosed else { return }
        let entries = settings.map { nghttp2_settings_entry(settings_id: $0.id, value: $0.value) }
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), entries, entries.count)
        flush()
    }

    /// Sends a PING; the delegate hears `didReceivePingAck`.
    public func ping() {
        guard let session, !isClosed else { return }
        nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
        flush()
    }

    /// Refuses a stream (server side), e.g. to model a stream limit.
    public func resetStream(_ streamID: Int32, errorCode: UInt32) {
        guard let session else { return }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode)
        flush()
    }

    /// Closes the TLS connection at once; unfinished streams are reported reset.
    public func close(error: (any Error)? = nil) {
        guard !isClosed else { return }
        closeError = error
        tls?.close()
        if tls == nil { finishClose() }
    }

    // MARK: TLSStreamDelegate

    public func streamDidConnect(_ stream: TLSStream) {
        flush()
        delegate?.connectionDidBecomeReady(self)
    }

    public func stream(_ stream: TLSStream, didReceive bytes: UnsafeRawBufferPointer) {
        guard let session, !isClosed else { return }
        insideSession = true
        let consumed = nghttp2_session_mem_recv(
            session, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
        insideSession = false
        if consumed < 0 {
            closeError = HTTP2Error("protocol error: \(errorText(Int32(consumed)))")
            flush()  // nghttp2 may have queued a GOAWAY explaining why
            stream.close()
            return
        }
        flush()
    }

    public func streamDidDrain(_ stream: TLSStream) { flush() }

    public func stream(_ stream: TLSStream, didCloseWith error: TLSError?) {
        if closeError == nil, let error { closeError = error }
        finishClose()
    }

    // MARK: Internals

    private func finishClose() {
        guard !isClosed else { return }
        isClosed = true
        isGoingAway = true
        let unfinished = streams.filter { !$0.value.finished }.keys.sorted()
        streams.removeAll()
        lastLookedUp = nil
        for id in unfinished {
            delegate?.connection(self, streamWasReset: id, errorCode: NGHTTP2_CANCEL.rawValue)
        }
        delegate?.connection(self, didCloseWith: closeError)
    }

    private var flushDeferred = false
    /// `flushAtEndOfIteration`'s work, made once rather than for every iteration.
    private lazy var deferredFlush: () -> Void = { [weak self] in
        guard let self else { return }
        self.flushDeferred = false
        self.flush()
    }

    /// Requests and responses are flushed once per event-loop iteration, so the
    /// frames of everything submitted meanwhile leave in one TLS write.
    private func flushAtEndOfIteration() {
        guard !flushDeferred, let tls else { return }
        flushDeferred = true
        tls.loop.deferToEndOfIteration(deferredFlush)
    }

    /// Moves whatever nghttp2 wants to send into the TLS stream. Called inside an
    /// nghttp2 callback (directly or through the delegate), it only takes note.
    fileprivate func flush() {
        guard let session, let tls, tls.isOpen else { return }
        if insideSession {
            flushRequested = true
            return
        }
        insideSession = true
        repeat {
            flushRequested = false
            while true {
                var data: UnsafePointer<UInt8>?
                let length = nghttp2_session_mem_send(session, &data)
                if length < 0 {
                    insideSession = false
                    closeError = HTTP2Error("send failed: \(errorText(Int32(length)))")
                    tls.close()
                    return
                }
                guard length > 0, let data else { break }
                // One frame at a time, valid until the next mem_send: the stream copies
                // it, and every frame of this flush leaves in one TLS write.
                tls.enqueue(UnsafeRawBufferPointer(start: data, count: length))
            }
            tls.flushWrites()
        } while flushRequested && tls.isOpen
        insideSession = false
        if tls.isOpen && nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
            tls.close()  // GOAWAY exchanged and every stream done
        }
    }

    /// A provider that reads `state`'s `outgoing` bytes, or nil for no body. Its
    /// source is the unretained state, so `readBody` needs no lookup: `streams`
    /// holds the state until nghttp2 closes the stream, after which it reads no more.
    private func withDataProvider<Result>(
        reading state: StreamState, _ body: (UnsafePointer<nghttp2_data_provider>?) -> Result
    ) -> Result {
        guard !state.outgoing.isEmpty else { return body(nil) }
        var provider = nghttp2_data_provider(
            source: nghttp2_data_source(ptr: Unmanaged.passUnretained(state).toOpaque()), read_callback: readBody)
        return withUnsafePointer(to: &provider) { body($0) }
    }

    fileprivate func errorText(_ code: Int32) -> String { String(cString: nghttp2_strerror(code)) }

    fileprivate func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let header = frame.pointee.hd
        switch UInt32(header.type) {
        case NGHTTP2_SETTINGS.rawValue where header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0:
            if let session {
                let limit = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
                if limit != remoteMaxConcurrentStreams {
                    remoteMaxConcurrentStreams = limit
                    delegate?.connection(self, didChangeMaxConcurrentStreams: limit)
                }
            }
        case NGHTTP2_GOAWAY.rawValue:
            isGoingAway = true
            let goAway = frame.pointee.goaway
            let debugData =
                goAway.opaque_data.map { Array(UnsafeBufferPointer(start: $0, count: goAway.opaque_data_len)) } ?? []
            delegate?.connection(
                self, didReceiveGoAway: goAway.last_stream_id, errorCode: goAway.error_code, debugData: debugData)
        case NGHTTP2_PING.rawValue where header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0:
            delegate?.connection(self, didReceivePingAck: ())
        case NGHTTP2_HEADERS.rawValue, NGHTTP2_DATA.rawValue:
            guard header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0, let state = state(of: header.stream_id),
                !state.finished
            else { return }
            state.finished = true
            delegate?.connection(self, streamDidFinish: header.stream_id, fields: state.fields, body: state.body)
        default:
            break
        }
    }

    fileprivate func headerReceived(
        streamID: Int32, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>
    ) {
        if let keptHeaderNames,
            !keptHeaderNames.contains(where: {
                $0.utf8CodeUnitCount == name.count
                    && memcmp($0.utf8Start, name.baseAddress.unsafelyUnwrapped, name.count) == 0
            })
        {
            return
        }
        state(of: streamID)?.fields.append(name: name, value: value)
    }

    fileprivate func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let state = streams.removeValue(forKey: streamID) else { return }
        if lastLookedUp?.id == streamID { lastLookedUp = nil }
        let finished = state.finished
        if spareStates.count < 256 {
            state.reset()
            spareStates.append(state)
        }
        if !finished {
            delegate?.connection(
                self, streamWasReset: streamID, errorCode: errorCode == 0 ? NGHTTP2_CANCEL.rawValue : errorCode)
        }
    }
}

// MARK: - nghttp2 callbacks (user_data is the unretained HTTP2Connection, which owns the session)

/// Runs `body` with the connection behind `userData`, without retaining it: nghttp2
/// calls back only from inside a method of the connection (receiving, sending or
/// submitting), which keeps it alive for the call.
private func withConnection<Result>(
    _ userData: UnsafeMutableRawPointer?, _ body: (HTTP2Connection) -> Result
) -> Result {
    Unmanaged<HTTP2Connection>.fromOpaque(userData!)._withUnsafeGuaranteedRef(body)
}

private let onBeginHeaders: nghttp2_on_begin_headers_callback = { _, frame, userData in
    guard let frame else { return 0 }
    withConnection(userData) { http2 in
        // A server learns of a new request stream here; a client's streams exist already.
        if http2.role == .server, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
            http2.streams[frame.pointee.hd.stream_id] == nil
        {
            http2.streams[frame.pointee.hd.stream_id] = http2.makeStreamState()
        }
    }
    return 0
}

private let onHeader: nghttp2_on_header_callback = { _, frame, name, nameLength, value, valueLength, _, userData in
    guard let frame, let name, let value else { return 0 }
    withConnection(userData) {
        $0.headerReceived(
            streamID: frame.pointee.hd.stream_id, name: UnsafeBufferPointer(start: name, count: nameLength),
            value: UnsafeBufferPointer(start: value, count: valueLength))
    }
    return 0
}

private let onDataChunk: nghttp2_on_data_chunk_recv_callback = { _, _, streamID, data, length, userData in
    guard let data else { return 0 }
    withConnection(userData) { http2 in
        http2.state(of: streamID)?.body.append(contentsOf: UnsafeBufferPointer(start: data, count: length))
    }
    return 0
}

private let onFrameReceived: nghttp2_on_frame_recv_callback = { _, frame, userData in
    guard let frame else { return 0 }
    withConnection(userData) { $0.frameReceived(frame) }
    return 0
}

private let onStreamClose: nghttp2_on_stream_close_callback = { _, streamID, errorCode, userData in
    withConnection(userData) { $0.streamClosed(streamID, errorCode: errorCode) }
    return 0
}

/// Copies the next piece of a stream's outgoing body (the source is its unretained state).
private let readBody: nghttp2_data_source_read_callback = { _, _, buffer, length, flags, source, _ in
    guard let buffer, let flags, let state = source?.pointee.ptr else {
        return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
    }
    return Unmanaged<HTTP2Connection.StreamState>.fromOpaque(state)._withUnsafeGuaranteedRef { state in
        state.copyOutgoing(into: buffer, length: length, flags: flags)
    }
}
