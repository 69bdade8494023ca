import Foundation
import Testing

@testable import Shared

@Suite struct APNsReasonTests {
    static let documented: [(String, APNsReason)] = [
        ("BadCollapseId", .badCollapseId), ("BadDeviceToken", .badDeviceToken),
        ("BadExpirationDate", .badExpirationDate), ("BadMessageId", .badMessageId), ("BadPriority", .badPriority),
        ("BadTopic", .badTopic), ("DeviceTokenNotForTopic", .deviceTokenNotForTopic),
        ("DuplicateHeaders", .duplicateHeaders), ("IdleTimeout", .idleTimeout), ("InvalidPushType", .invalidPushType),
        ("MissingDeviceToken", .missingDeviceToken), ("MissingTopic", .missingTopic), ("PayloadEmpty", .payloadEmpty),
        ("TopicDisallowed", .topicDisallowed), ("BadCertificate", .badCertificate),
        ("BadCertificateEnvironment", .badCertificateEnvironment), ("ExpiredProviderToken", .expiredProviderToken),
        ("Forbidden", .forbidden), ("InvalidProviderToken", .invalidProviderToken),
        ("MissingProviderToken", .missingProviderToken), ("UnrelatedKeyIdInToken", .unrelatedKeyIdInToken),
        ("BadEnvironmentKeyInToken", .badEnvironmentKeyInToken), ("BadPath", .badPath),
        ("MethodNotAllowed", .methodNotAllowed), ("ExpiredToken", .expiredToken),
        ("Unregistered", .unregistered(timestamp: nil)), ("PayloadTooLarge", .payloadTooLarge),
        ("TooManyProviderTokenUpdates", .tooManyProviderTokenUpdates), ("TooManyRequests", .tooManyRequests),
        ("InternalServerError", .internalServerError), ("ServiceUnavailable", .serviceUnavailable),
        ("Shutdown", .shutdown),
    ]

    @Test func everyDocumentedReasonIsParsedFromItsBodyAndNamedBack() {
        #expect(Self.documented.count == 32)
        #expect(APNsReason.documented.count == 32)
        for (name, reason) in Self.documented {
            let parsed = APNsReason(body: Array(#"{"reason":"\#(name)"}"#.utf8))
            #expect(parsed == reason, "\(name)")
            #expect(reason.name == name)
            #expect(APNsReason(name: name) == reason)
        }
    }

    @Test func unregisteredCarriesItsTimestampInMilliseconds() throws {
        let reason = try #require(APNsReason(body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8)))
        guard case .unregistered(let timestamp) = reason else {
            Issue.record("expected Unregistered, got \(reason)")
            return
        }
        let date = try #require(timestamp)
        #expect(abs(date.timeIntervalSince1970 - 1_700_000_000.123) < 0.001)
        let response = try #require(
            APNsResponse(
                headers: [
                    HTTP2Header(":status", "410"), HTTP2Header("apns-id", "E7D8A9B0-1111-2222-3333-444455556666"),
                ],
                body: Array(#"{"reason":"Unregistered","timestamp":1700000000123}"#.utf8)))
        #expect(response.status == 410)
        #expect(response.apnsID == UUID(uuidString: "E7D8A9B0-1111-2222-3333-444455556666"))
        #expect(response.unregisteredTimestamp == date)
    }

    @Test func anUndocumentedReasonIsKeptAsUnknown() {
        #expect(APNsReason(body: Array(#"{"reason":"BrandNewReason"}"#.utf8)) == .unknown("BrandNewReason"))
        #expect(APNsReason.unknown("BrandNewReason").name == "BrandNewReason")
    }

    @Test func bodiesWithoutAReasonGiveNone() {
        for body in ["", "{}", "not json", #"{"reason":42}"#, "[]"] {
            #expect(APNsReason(body: Array(body.utf8)) == nil, "\(body)")
        }
        let ok = APNsResponse(headers: [HTTP2Header(":status", "200")], body: [])
        #expect(ok?.isSuccess == true)
        #expect(ok?.reason == nil)
        #expect(APNsResponse(headers: [], body: []) == nil)
    }
}
