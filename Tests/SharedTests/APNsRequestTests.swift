import Foundation
import Testing

@testable import Shared

@Suite struct APNsRequestTests {
    let token = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"

    @Test func headersCarryEveryFieldInAPNsForm() throws {
        let id = UUID(uuidString: "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0")!
        let notification = APNsNotification(
            deviceToken: token, topic: "com.example.app", pushType: .alert, priority: .considerPower,
            expiration: .at(Date(timeIntervalSince1970: 1_700_000_123.9)), collapseID: "thread-7", apnsID: id,
            payload: Array(#"{"aps":{}}"#.utf8))
        let headers = try notification.requestHeaders(authority: "api.push.apple.com", providerToken: "jwt.token.sig")
        #expect(
            headers == [
                HTTP2Header(":method", "POST"),
                HTTP2Header(":scheme", "https"),
                HTTP2Header(":authority", "api.push.apple.com"),
                HTTP2Header(":path", "/3/device/\(token)"),
                HTTP2Header("authorization", "bearer jwt.token.sig"),
                HTTP2Header("apns-topic", "com.example.app"),
                HTTP2Header("apns-push-type", "alert"),
                HTTP2Header("apns-priority", "5"),
                HTTP2Header("apns-expiration", "1700000123"),
                HTTP2Header("apns-collapse-id", "thread-7"),
                HTTP2Header("apns-id", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"),
            ])
    }

    @Test func optionalHeadersAreLeftOutAndExpirationZeroMeansImmediately() throws {
        var notification = APNsNotification(
            deviceToken: token, topic: "com.example.app", pushType: .background, priority: .low, payload: [])
        var headers = try notification.requestHeaders(authority: "localhost:2197", providerToken: "t")
        #expect(headers[":authority"] == "localhost:2197")
        #expect(headers["apns-push-type"] == "background")
        #expect(headers["apns-priority"] == "1")
        #expect(headers["apns-expiration"] == nil)
        #expect(headers["apns-collapse-id"] == nil)
        #expect(headers["apns-id"] == nil)
        notification.expiration = .immediately
        headers = try notification.requestHeaders(authority: "h", providerToken: "t")
        #expect(headers["apns-expiration"] == "0")
        #expect(APNsPriority.immediate.rawValue == 10)
    }

    @Test func aDeviceTokenThatIsNotHexIsRefusedWithoutEchoingIt() {
        for bad in ["", "abc/../x", "zz", "ab cd", String(repeating: "a", count: 201)] {
            let notification = APNsNotification(deviceToken: bad, topic: "t", payload: [])
            #expect(throws: APNsClientError.self) {
                try notification.requestHeaders(authority: "h", providerToken: "t")
            }
            do {
                _ = try notification.requestHeaders(authority: "h", providerToken: "t")
            } catch {
                #expect(error.code == .invalidRequest)
                #expect(bad.isEmpty || !error.description.contains(bad))
            }
        }
        let injected = APNsNotification(deviceToken: token, topic: "t", collapseID: "a\r\nx-evil: 1", payload: [])
        #expect(throws: APNsClientError.self) { try injected.requestHeaders(authority: "h", providerToken: "t") }
    }

    @Test func descriptionsNeverShowTokensOrPayloads() {
        let notification = APNsNotification(
            deviceToken: token, topic: "com.example.app", payload: Array("secret-body".utf8))
        #expect(!notification.description.contains(token))
        #expect(!notification.description.contains("secret-body"))
        let error = APNsClientError(.connection, "lost", underlying: TLSError(.closed, "peer closed"))
        #expect(error.description == "APNs connection: lost (TLS closed: peer closed)")
        struct Secretive: Error { let token = "very-secret" }
        #expect(!APNsClientError(.providerToken, "x", underlying: Secretive()).description.contains("very-secret"))
    }

    @Test func environmentsComeFromBaseURLs() throws {
        #expect(APNsEnvironment.production.authority == "api.push.apple.com")
        #expect(APNsEnvironment.sandbox.host == "api.sandbox.push.apple.com")
        let local = try #require(APNsEnvironment(name: "sandbox", baseURL: URL(string: "https://localhost:2197")!))
        #expect(local.host == "localhost" && local.port == 2197 && local.authority == "localhost:2197")
        #expect(APNsEnvironment(name: "x", baseURL: URL(string: "http://localhost")!) == nil)
    }
}

@Suite struct APNsRequestQueueTests {
    @Test func newRequestsAreBoundedAndServedInOrderAfterRetries() {
        var queue = APNsRequestQueue<Int>(capacity: 3)
        #expect(queue.append(1) && queue.append(2) && queue.append(3))
        let fourth = queue.append(4)
        #expect(!fourth)
        #expect(queue.isFull)
        queue.requeue(100)  // retries are never refused, and go first
        queue.requeue(101)
        #expect(queue.count == 5)
        #expect(queue.popFirst() == 100)
        #expect(queue.popFirst() == 101)
        #expect(queue.popFirst() == 1)
        let fifth = queue.append(5)
        #expect(fifth)
        #expect(queue.removeAll { $0 == 3 } == [3])
        #expect(queue.removeAll() == [2, 5])
        #expect(queue.popFirst() == nil)
        #expect(queue.isEmpty)
    }

    @Test func manyPushesAndPopsKeepOrder() {
        var queue = APNsRequestQueue<Int>(capacity: 10_000)
        var next = 0
        var expected = 0
        for round in 0..<50 {
            for _ in 0..<(round % 7 + 100) {
                let added = queue.append(next)
                #expect(added)
                next += 1
            }
            for _ in 0..<95 {
                #expect(queue.popFirst() == expected)
                expected += 1
            }
        }
        while let value = queue.popFirst() {
            #expect(value == expected)
            expected += 1
        }
        #expect(expected == next)
    }
}
