// The simulator's control API: HTTP/1.1 + JSON on its own loopback listener
// (`--control`). Tests and scripts read what APNs received and inject faults.
//
//   GET    /health                      → 200 {"ok":true}
//   GET    /stats                       → 200 counters: {"accepted":n,"rejected":{"<Reason>":n},
//                                          "connections":{"opened":n,"open":n},
//                                          "providerTokens":{"seen":n,"verifications":n},
//                                          "streamsRefusedAfterGoAway":n,"faultsInjected":n,"goAwaysSent":n,
//                                          "peakOpenStreams":n (most streams open at once on one connection),
//                                          "recorded":n,"recordingsDropped":n,"pendingFaults":[…],"latencyMs":n,
//                                          "responsesHeld":n (requests whose responses the latency holds back)}
//   GET    /notifications[?after=SEQ&token=HEX&limit=N]
//                                        → 200 {"notifications":[{"sequence","apnsId","deviceToken","topic",
//                                          "teamId","keyId","connection","receivedAt" (ms since 1970),
//                                          "receivedAtUs" (µs since 1970),"headers":{…},
//                                          "payload":{…}}…]}  (oldest first; headers exclude authorization;
//                                          "receivedAt" and the order are when each was accepted and answered,
//                                          after any injected latency, as a device would see it)
//   DELETE /notifications               → 204, recordings cleared
//   GET    /rules                       → 200 {"keys":{kid:{"teamId","revoked"}},"bundleIds":{id:team},
//                                          "deviceTopics":{token:topic},"uninstalled":{token:ms},
//                                          "deviceHosts":{token:host}}
//   POST   /faults   {"status":429|500|503,"count":N}
//                                        → 204; the next N requests (any connection, after faults already
//                                          queued) answer TooManyRequests / InternalServerError / ServiceUnavailable
//   DELETE /faults                      → 204, queued faults dropped
//   PUT    /latency  {"milliseconds":N}  → 204; every response is held back N ms (0 turns it off)
//   POST   /goaway   {"lastStreamId":N?,"errorCode":N?,"reason":"Name"?}
//                                        → 200 {"connections":n}: GOAWAY now on every open connection; with
//                                          lastStreamId, in-flight streams above it are refused (RST_STREAM
//                                          REFUSED_STREAM), never answered or recorded
//   PUT    /keys/{kid}  {"teamId":"…","publicKey":"PEM or base64url point"}
//                                        → 204, key added or replaced (and no longer revoked)
//   POST   /keys/{kid}/revoke           → 204 (404 unknown kid); its tokens answer 403 InvalidProviderToken,
//                                          also on connections that already use them
//   PUT    /bundles/{bundleId}  {"teamId":"…"}
//                                        → 204, the bundle id now belongs to that team (added or moved)
//   PUT    /devices/{token}  {"topic":"…"}
//                                        → 204; pushes to the token for another topic: 400 DeviceTokenNotForTopic
//   POST   /devices/{token}/uninstall  {"timestamp":MS?}
//                                        → 204; pushes to it: 410 Unregistered with that timestamp (default now)
//   PUT    /devices/{token}/environment  {"host":"…"}
//                                        → 204; the token is one of that host's environment: pushed through
//                                          another `:authority` host (the other environment), 400 BadDeviceToken
//   DELETE /devices/{token}             → 204, topic binding, environment and uninstall forgotten
//   POST   /reset                       → 204, back to the configuration file: rules, faults, latency,
//                                          recordings and counters
//
// Errors: 400/404/405 {"error":"…"}. Device tokens are matched in any case.
import Foundation
import Shared

struct ControlAPI: HTTPHandler {
    let server: SimulatorServer
    var state: SimulatorState { server.state }

    func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let segments = request.path.split(separator: "/").map { String($0).removingPercentEncoding ?? String($0) }
        do {
            return try await route(request, segments)
        } catch let error as ControlError {
            return .json(error.status, "{\"error\":\(JSONString.quote(error.message))}")
        } catch {
            return .json(400, "{\"error\":\(JSONString.quote("\(error)"))}")
        }
    }

    private func route(_ request: HTTPRequest, _ path: [String]) async throws -> HTTPResponse {
        switch (request.method, path.count, path.first ?? "") {
        case ("GET", 1, "health"): return .json(200, #"{"ok":true}"#)
        case ("GET", 1, "stats"): return .json(200, statsJSON())
        case ("GET", 1, "notifications"): return .json(200, notificationsJSON(request.head.query))
        case ("DELETE", 1, "notifications"):
            state.clearRecordings()
            return noContent
        case ("GET", 1, "rules"): return .json(200, rulesJSON())
        case ("POST", 1, "faults"):
            let body = try object(request)
            let status = try integer(body, "status")
            guard let rejection = APNsRejection.fault(status: status) else {
                throw ControlError(400, "status must be 429, 500 or 503")
            }
            let count = try integer(body, "count", default: 1)
            guard count >= 1 else { throw ControlError(400, "count must be at least 1") }
            state.injectFault(rejection, count: count)
            return noContent
        case ("DELETE", 1, "faults"):
            state.clearFaults()
            return noContent
        case ("PUT", 1, "latency"):
            let milliseconds = try integer(try object(request), "milliseconds")
            guard (0...60_000).contains(milliseconds) else { throw ControlError(400, "milliseconds must be 0…60000") }
            state.setLatency(milliseconds: milliseconds)
            return noContent
        case ("POST", 1, "goaway"):
            let body = request.body.isEmpty ? [:] : try object(request)
            var lastStreamID: Int32?
            if body["lastStreamId"] != nil {
                guard let value = Int32(exactly: try integer(body, "lastStreamId")), value >= 0 else {
                    throw ControlError(400, "lastStreamId must be 0…2^31-1")
                }
                lastStreamID = value
            }
            guard let errorCode = UInt32(exactly: try integer(body, "errorCode", default: 0)) else {
                throw ControlError(400, "errorCode must be 0…2^32-1")
            }
            var reason: String?
            if body["reason"] != nil {
                let text = try string(body, "reason")
                guard !text.isEmpty, text.allSatisfy({ $0.isLetter || $0.isNumber }) else {
                    throw ControlError(400, "reason must be a name like BadCertificateEnvironment")
                }
                reason = text
            }
            let count = await server.goAwayAll(lastStreamID: lastStreamID, errorCode: errorCode, reason: reason)
            return .json(200, "{\"connections\":\(count)}")
        case ("PUT", 2, "keys"):
            let body = try object(request)
            let teamID = try string(body, "teamId")
            let key: P256PublicKey
            do {
                key = try SimulatorConfiguration.publicKey(try string(body, "publicKey"))
            } catch let error as ControlError {
                throw error
            } catch {
                throw ControlError(400, "publicKey: \(error)")
            }
            state.updateRules { $0.setKey(path[1], teamID: teamID, publicKey: key) }
            return noContent
        case ("POST", 3, "keys") where path[2] == "revoke":
            guard state.updateRules({ $0.revokeKey(path[1]) }) else { throw ControlError(404, "unknown key id") }
            return noContent
        case ("PUT", 2, "bundles"):
            let teamID = try string(try object(request), "teamId")
            state.updateRules { $0.bundleOwners[path[1]] = teamID }
            return noContent
        case ("PUT", 2, "devices"):
            let topic = try string(try object(request), "topic")
            state.updateRules { $0.deviceTopics[path[1].lowercased()] = topic }
            return noContent
        case ("POST", 3, "devices") where path[2] == "uninstall":
            let body = request.body.isEmpty ? [:] : try object(request)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let timestamp = Int64(try integer(body, "timestamp", default: Int(now)))
            state.updateRules { $0.uninstalled[path[1].lowercased()] = timestamp }
            return noContent
        case ("PUT", 3, "devices") where path[2] == "environment":
            let host = APNsRequestValidator.host(ofAuthority: try string(try object(request), "host"))
            state.updateRules { $0.deviceHosts[path[1].lowercased()] = host }
            return noContent
        case ("DELETE", 2, "devices"):
            state.updateRules { rules in
                rules.deviceTopics[path[1].lowercased()] = nil
                rules.uninstalled[path[1].lowercased()] = nil
                rules.deviceHosts[path[1].lowercased()] = nil
            }
            return noContent
        case ("POST", 1, "reset"):
            state.reset()
            return noContent
        default:
            throw ControlError(404, "no route \(request.method) \(request.path)")
        }
    }

    private var noContent: HTTPResponse { HTTPResponse(status: 204) }

    // MARK: JSON out

    private func statsJSON() -> String {
        let counters = state.counters
        let rejected = counters.rejected.sorted { $0.key < $1.key }.map { "\(JSONString.quote($0.key)):\($0.value)" }
        let faults = state.faults.map { "{\"status\":\($0.rejection.status),\"remaining\":\($0.remaining)}" }
        let recorded = state.recordedCount
        return "{\"accepted\":\(counters.accepted),\"rejected\":{\(rejected.joined(separator: ","))},"
            + "\"connections\":{\"opened\":\(counters.connectionsOpened),\"open\":\(counters.connectionsOpen)},"
            + "\"providerTokens\":{\"seen\":\(counters.providerTokens.count),"
            + "\"verifications\":\(counters.providerTokenVerifications)},"
            + "\"streamsRefusedAfterGoAway\":\(counters.streamsRefusedAfterGoAway),"
            + "\"faultsInjected\":\(counters.faultsInjected),\"goAwaysSent\":\(counters.goAwaysSent),"
            + "\"peakOpenStreams\":\(counters.peakOpenStreams),"
            + "\"recorded\":\(recorded),\"recordingsDropped\":\(counters.recordingsDropped),"
            + "\"pendingFaults\":[\(faults.joined(separator: ","))],\"latencyMs\":\(state.latencyMilliseconds),"
            + "\"responsesHeld\":\(state.responsesHeld)}"
    }

    private func notificationsJSON(_ query: [(name: String, value: String)]) -> String {
        let after = query.first { $0.name == "after" }.flatMap { Int($0.value) } ?? 0
        let token = query.first { $0.name == "token" }?.value
        let limit = query.first { $0.name == "limit" }.flatMap { Int($0.value) } ?? .max
        let records = state.recordings(after: after, deviceToken: token, limit: limit)
        return "{\"notifications\":[" + records.map(\.json).joined(separator: ",") + "]}"
    }

    private func rulesJSON() -> String {
        let rules = state.rules
        func object(_ entries: [(String, String)]) -> String {
            "{" + entries.sorted { $0.0 < $1.0 }.map { "\(JSONString.quote($0.0)):\($0.1)" }.joined(separator: ",")
                + "}"
        }
        let keys = object(
            rules.keys.map {
                ($0.key, "{\"teamId\":\(JSONString.quote($0.value.teamID)),\"revoked\":\($0.value.isRevoked)}")
            })
        let bundles = object(rules.bundleOwners.map { ($0.key, JSONString.quote($0.value)) })
        let topics = object(rules.deviceTopics.map { ($0.key, JSONString.quote($0.value)) })
        let uninstalled = object(rules.uninstalled.map { ($0.key, String($0.value)) })
        let hosts = object(rules.deviceHosts.map { ($0.key, JSONString.quote($0.value)) })
        return "{\"keys\":\(keys),\"bundleIds\":\(bundles),\"deviceTopics\":\(topics),\"uninstalled\":\(uninstalled),"
            + "\"deviceHosts\":\(hosts)}"
    }

    // MARK: JSON in

    private func object(_ request: HTTPRequest) throws -> [String: Any] {
        guard let value = try? JSONSerialization.jsonObject(with: Data(request.body)),
            let object = value as? [String: Any]
        else { throw ControlError(400, "the body must be a JSON object") }
        return object
    }

    private func integer(_ object: [String: Any], _ name: String, default fallback: Int? = nil) throws -> Int {
        guard let value = object[name] else {
            if let fallback { return fallback }
            throw ControlError(400, "\(name) is required")
        }
        guard let number = value as? NSNumber, let integer = Int(exactly: number.doubleValue)
        else { throw ControlError(400, "\(name) must be an integer") }
        return integer
    }

    private func string(_ object: [String: Any], _ name: String) throws -> String {
        guard let value = object[name] as? String, !value.isEmpty else {
            throw ControlError(400, "\(name) must be a non-empty string")
        }
        return value
    }
}

struct ControlError: Error {
    let status: Int
    let message: String
    init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }
}
