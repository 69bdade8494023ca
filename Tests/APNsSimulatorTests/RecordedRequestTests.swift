import Shared
import Testing

@testable import APNsSimulator

@Suite struct RecordedRequestTests {
    @Test func keepsEveryHeaderButAuthorizationInOrderAndThePayload() {
        let headers = [
            HTTP2Header(":method", "POST"), HTTP2Header(":path", "/3/device/\(Fixtures.deviceToken)"),
            HTTP2Header("authorization", "bearer x.y.z"), HTTP2Header("apns-topic", "com.example.app"),
            HTTP2Header("x-empty", ""), HTTP2Header("x-twice", "1"), HTTP2Header("x-twice", "2"),
            HTTP2Header("x-text", "héllo ✓"),
        ]
        let recorded = RecordedRequest(headers: headers, payload: Fixtures.payload)
        #expect(recorded.headers == headers.filter { $0.name != "authorization" })
        #expect(recorded.payload == Fixtures.payload)
        #expect(recorded.value(of: "x-twice") == "1")
        #expect(recorded.value(of: "apns-topic") == "com.example.app")
        #expect(recorded.value(of: "authorization") == nil)
        let empty = RecordedRequest(headers: [], payload: [])
        #expect(empty.headers.isEmpty)
        #expect(empty.payload.isEmpty)
    }

    @Test func aMadeAPNsIDReadsTheSameInTheResponseAndTheRecording() {
        var generator = APNsIDGenerator()
        let id = generator.next()
        var bytes: [UInt8] = []
        id.write(to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == id.description)
        #expect(APNsRequestValidator.isCanonicalUUID(id.description))
        let requested = APNsID.requested("123e4567-e89b-12d3-a456-426614174000")
        bytes = []
        requested.write(to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == "123e4567-e89b-12d3-a456-426614174000")
    }
}

@Suite struct RecordingRingTests {
    func metadata(_ sequence: Int) -> RecordingRing.Metadata {
        .init(
            sequence: sequence, receivedAtMicroseconds: 1, responseID: .requested("id\(sequence)"), teamID: Fixtures.teamID,
            keyID: Fixtures.keyID, connectionID: 1)
    }

    func headers(token: String) -> [HTTP2Header] {
        [HTTP2Header(":path", "/3/device/\(token)"), HTTP2Header("apns-topic", Fixtures.bundleID)]
    }

    /// Thousands of 4 KB recordings through a ring of 3: chunks are filled, recycled and
    /// reused, and the newest 3 always read back intact.
    @Test func keepsTheNewestAcrossRecycledChunks() {
        var ring = RecordingRing(capacity: 3)
        var dropped = 0
        for sequence in 1...3000 {
            let payload = [UInt8](repeating: UInt8(truncatingIfNeeded: sequence), count: 4000 + sequence % 7)
            if ring.append(metadata(sequence), headers: headers(token: "ab\(sequence)"), payload: payload) {
                dropped += 1
            }
            if sequence % 500 == 0 || sequence < 5 {
                let read = ring.recordings(after: 0, deviceToken: nil, limit: .max)
                #expect(read.map(\.sequence) == Array(max(1, sequence - 2)...sequence))
                for record in read {
                    #expect(record.deviceToken == "ab\(record.sequence)")
                    #expect(record.apnsID == "id\(record.sequence)")
                    #expect(
                        record.payload
                            == [UInt8](
                                repeating: UInt8(truncatingIfNeeded: record.sequence),
                                count: 4000 + record.sequence % 7))
                }
            }
        }
        #expect(dropped == 2997)
        #expect(ring.count == 3)
        ring.removeAll()
        #expect(ring.count == 0)
        _ = ring.append(metadata(3001), headers: headers(token: "cd"), payload: [1])
        #expect(ring.recordings(after: 0, deviceToken: nil, limit: .max).map(\.payload) == [[1]])
    }

    @Test func filtersByDeviceTokenInAnyCaseAfterASequenceUpToALimit() {
        var ring = RecordingRing(capacity: 10)
        for sequence in 1...6 {
            _ = ring.append(metadata(sequence), headers: headers(token: sequence % 2 == 0 ? "AB" : "cd"), payload: [])
        }
        #expect(ring.recordings(after: 0, deviceToken: "ab", limit: .max).map(\.sequence) == [2, 4, 6])
        #expect(ring.recordings(after: 2, deviceToken: "Ab", limit: 1).map(\.sequence) == [4])
        #expect(ring.recordings(after: 4, deviceToken: nil, limit: .max).map(\.sequence) == [5, 6])
    }
}
