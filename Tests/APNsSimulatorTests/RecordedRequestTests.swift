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
