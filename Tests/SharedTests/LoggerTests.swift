import Foundation
import TestSupport
import Testing

@testable import Shared

@Suite struct LoggerTests {
    @Test func writesOneJSONObjectPerLineWithLevelTimeAndComponent() throws {
        let (logger, lines) = TestEnvironment.capturingLogger("ingress")
        logger.child("postgres").warning("pool \"exhausted\"\n", metadata: ["pool.size": "4"])
        let line = try #require(lines.all.first)
        #expect(line.hasSuffix("}\n"))
        #expect(line.filter { $0 == "\n" }.count == 1)
        let object = try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["level"] == "warning")
        #expect(object["component"] == "ingress.postgres")
        #expect(object["message"] == "pool \"exhausted\"\n")
        #expect(object["pool.size"] == "4")
        let time = try #require(object["time"])
        #expect(time.count == 24 && time.hasSuffix("Z"))
    }

    @Test func dropsMessagesBelowTheMinimumLevelWithoutBuildingThem() {
        let lines = CapturedLogLines()
        let logger = Logger(component: "worker", minimumLevel: .notice, sink: .capturing(into: lines))
        var built = false
        logger.info(
            {
                built = true
                return "noise"
            }())
        logger.notice("kept")
        #expect(!built)
        #expect(lines.all.count == 1)
    }

    @Test func redactedTokenKeepsOnlyAPrefixAndTheLength() {
        let token = String(repeating: "ab", count: 32)
        #expect(Redact.token(token) == "abababab…(64)")
    }

    @Test func jsonQuotingEscapesControlCharacters() {
        #expect(JSONString.quote("a\u{01}\"\\\tb") == #""a\u0001\"\\\tb""#)
    }
}
