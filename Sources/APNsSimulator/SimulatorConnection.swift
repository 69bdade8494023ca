import CNGHTTP2
import Foundation
import Shared

/// One client connection: HTTP/2 on TLS, judged request by request.
///
/// Loop-confined (like the `HTTP2Connection` it drives), so its provider-token
/// cache and stream-limit state need no lock. Starts with
/// SETTINGS_MAX_CONCURRENT_STREAMS = 1 (sent by `SimulatorServer`) and raises it
/// to the configured value after the first request whose provider token passes,
/// as APNs does; nghttp2 itself refuses streams beyond the limit in force.
final class SimulatorConnection: HTTP2ConnectionDelegate {
    let id: Int
    let http2: HTTP2Connection
    let loop: EventLoop
    private let state: SimulatorState
    private let logger: Logger
    private let onClose: (SimulatorConnection) -> Void
    private var tokens = ProviderTokenCache()
    private var rules = SimulatorState.RulesSnapshot()
    private var ids = APNsIDGenerator()
    /// The fields of the request being judged, in buffers reused request after request.
    private var requestHeaders = APNsRequestHeaders()
    private(set) var raisedStreamLimit = false
    /// The most streams open at once on this connection so far (reported to the state when it grows).
    private var peakOpenStreams = 0
    /// Set by `goAway(lastStreamID:)`: streams above it are refused, not answered.
    private var goAwayLastStreamID: Int32?
    /// Response after response's header fields (nghttp2 copies them).
    private var responseFields = HTTP2HeaderFields(reservingCapacity: 3, bytes: 64)
    /// Responses held back by injected latency.
    private var delayed: [Int32: EventLoop.TimerID] = [:]

    init(
        id: Int, http2: HTTP2Connection, loop: EventLoop, state: SimulatorState, logger: Logger,
        onClose: @escaping (SimulatorConnection) -> Void
    ) {
        self.id = id
        self.http2 = http2
        self.loop = loop
        self.state = state
        self.logger = logger
        self.onClose = onClose
    }

    /// Sends GOAWAY. With `lastStreamID`, streams above it that are in flight are
    /// refused (the client retries them elsewhere) instead of being answered.
    func goAway(lastStreamID: Int32?, errorCode: UInt32, reason: String? = nil) {
        if let lastStreamID {
            goAwayLastStreamID = min(goAwayLastStreamID ?? .max, lastStreamID)
            for (streamID, timer) in delayed where streamID > lastStreamID {
                loop.cancel(timer)
                delayed[streamID] = nil
                state.releaseHeldResponses(1)
                refuseAfterGoAway(streamID)
            }
        }
        // Apple may say why as in a response body: `{"reason": …}` in the debug data.
        let debugData = reason.map { Array("{\"reason\":\"\($0)\"}".utf8) } ?? []
        http2.goAway(errorCode: errorCode, lastStreamID: lastStreamID, debugData: debugData)
    }

    // MARK: HTTP2ConnectionDelegate

    func connectionDidBecomeReady(_ connection: HTTP2Connection) {}

    func connection(
        _ connection: HTTP2Connection, streamDidFinish streamID: Int32, headers: [HTTP2Header], body: [UInt8]
    ) {
        if let last = goAwayLastStreamID, streamID > last {
            refuseAfterGoAway(streamID)
            return
        }
        if connection.openStreams > peakOpenStreams {
            peakOpenStreams = connection.openStreams
            state.notePeakOpenStreams(peakOpenStreams)
        }
        let context = state.beginRequest(rules: &rules)
        let verdict: APNsRequestValidator.Verdict
        if let fault = context.fault {
            // The first apns-id given (the validator, judging a request, takes the last).
            let requested = headers["apns-id"].flatMap {
                APNsRequestValidator.isCanonicalUUID($0) ? APNsID.requested($0) : nil
            }
            verdict = .init(responseID: requested ?? ids.next(), outcome: .failure(fault), authenticated: false)
        } else {
            requestHeaders.read(headers)
            let verifications = tokens.verifications
            let previous = tokens.current?.token
            verdict = APNsRequestValidator.validate(
                requestHeaders, body: body, rules: context.rules, tokens: &tokens,
                now: Int64(Date().timeIntervalSince1970), newID: { ids.next() })
            if tokens.verifications != verifications {
                let installed = tokens.current?.token
                state.noteTokenVerification(
                    count: tokens.verifications - verifications, accepted: installed != previous ? installed : nil)
            }
        }
        if verdict.authenticated && !raisedStreamLimit {
            raisedStreamLimit = true
            connection.updateSettings([
                (Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), state.configuration.maxConcurrentStreams)
            ])
        }
        guard context.latencyMilliseconds > 0 else {
            respond(streamID, verdict: verdict, headers: headers, body: body)
            return
        }
        state.holdResponse()
        delayed[streamID] = loop.schedule(after: .milliseconds(context.latencyMilliseconds)) { [weak self] in
            guard let self, delayed.removeValue(forKey: streamID) != nil else { return }
            state.releaseHeldResponses(1)
            respond(streamID, verdict: verdict, headers: headers, body: body)
        }
    }

    func connection(_ connection: HTTP2Connection, streamWasReset streamID: Int32, errorCode: UInt32) {
        if let timer = delayed.removeValue(forKey: streamID) {
            loop.cancel(timer)
            state.releaseHeldResponses(1)
        }
    }

    func connection(_ connection: HTTP2Connection, didCloseWith error: (any Error)?) {
        for timer in delayed.values { loop.cancel(timer) }
        state.releaseHeldResponses(delayed.count)
        delayed = [:]
        if let error { logger.debug("connection closed", metadata: ["connection": "\(id)", "error": "\(error)"]) }
        onClose(self)
    }

    // MARK: Internals

    private func respond(
        _ streamID: Int32, verdict: APNsRequestValidator.Verdict, headers: [HTTP2Header], body: [UInt8]
    ) {
        responseFields.removeAll()
        switch verdict.outcome {
        case .success(let accepted):
            state.finishRequest(
                accepted: accepted, apnsID: verdict.responseID, headers: headers, payload: body, connectionID: id)
            responseFields.append(":status", "200")
            responseFields.appendUnindexed("apns-id") { verdict.responseID.write(to: &$0) }
            http2.sendResponse(streamID: streamID, fields: responseFields, body: [])
        case .failure(let rejection):
            state.finishRequest(rejected: rejection)
            responseFields.append(":status", String(rejection.status))
            responseFields.appendUnindexed("apns-id") { verdict.responseID.write(to: &$0) }
            responseFields.append("content-type", "application/json")
            http2.sendResponse(streamID: streamID, fields: responseFields, body: rejection.body)
        }
    }

    private func refuseAfterGoAway(_ streamID: Int32) {
        state.noteStreamRefusedAfterGoAway()
        http2.resetStream(streamID, errorCode: NGHTTP2_REFUSED_STREAM.rawValue)
    }
}
