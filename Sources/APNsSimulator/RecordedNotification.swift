import Shared

/// An accepted notification as the simulator keeps it for tests: every request
/// header but `authorization` (pseudo-headers included), in arrival order, and
/// the payload bytes exactly as sent.
///
/// Made when read from the `RecordingRing`, with a copy of the request: the
/// device token and topic are read back from the recorded `:path` and
/// `apns-topic`, and an `apns-id` the simulator made is kept as its bits.
struct RecordedNotification: Sendable {
    let metadata: RecordingRing.Metadata
    let request: RecordedRequest

    init(_ metadata: RecordingRing.Metadata, request: RecordedRequest) {
        self.metadata = metadata
        self.request = request
    }

    /// 1, 2, 3… in order of acceptance, never reused until a reset.
    var sequence: Int { metadata.sequence }
    /// Milliseconds since 1970.
    var receivedAt: Int64 { metadata.receivedAtMicroseconds / 1000 }
    /// Microseconds since 1970: latencies under a millisecond need it.
    var receivedAtMicroseconds: Int64 { metadata.receivedAtMicroseconds }
    var apnsID: String { metadata.responseID.description }
    var teamID: String { metadata.teamID }
    var keyID: String { metadata.keyID }
    var connectionID: Int { metadata.connectionID }
    /// As it appeared in `:path`.
    var deviceToken: String { Self.deviceToken(inPath: request.value(of: ":path")) }
    var topic: String { request.value(of: "apns-topic") ?? "" }
    var payload: [UInt8] { request.payload }
    /// Every header but `authorization`, in arrival order.
    var headers: [HTTP2Header] { request.headers }

    /// `/3/device/<token>` → `<token>` (the request was accepted, so the path has that form).
    static func deviceToken(inPath path: String?) -> String {
        String(decoding: (path ?? "").utf8.dropFirst(10), as: UTF8.self)
    }

    /// `{"sequence":…,"apnsId":…,"deviceToken":…,"topic":…,"teamId":…,"keyId":…,
    /// "connection":…,"receivedAt":…,"receivedAtUs":…,"headers":{name:value…},"payload":{…}}`;
    /// `payload` is the JSON object as sent (it was checked to be one). A header
    /// given twice is joined with ", ".
    var json: String {
        var merged: [(String, String)] = []
        for header in headers {
            if let index = merged.firstIndex(where: { $0.0 == header.name }) {
                merged[index].1 += ", " + header.value
            } else {
                merged.append((header.name, header.value))
            }
        }
        let headerFields = merged.map { JSONString.quote($0.0) + ":" + JSONString.quote($0.1) }.joined(separator: ",")
        return "{\"sequence\":\(sequence),\"apnsId\":\(JSONString.quote(apnsID)),"
            + "\"deviceToken\":\(JSONString.quote(deviceToken)),\"topic\":\(JSONString.quote(topic)),"
            + "\"teamId\":\(JSONString.quote(teamID)),\"keyId\":\(JSONString.quote(keyID)),"
            + "\"connection\":\(connectionID),\"receivedAt\":\(receivedAt),"
            + "\"receivedAtUs\":\(receivedAtMicroseconds),"
            + "\"headers\":{\(headerFields)},\"payload\":\(String(decoding: payload, as: UTF8.self))}"
    }
}
