import Foundation
import Testing

@testable import APNsSimulator

@Suite struct JSONPayloadInspectorTests {
    func verdict(_ text: String) -> JSONPayloadInspector.Verdict { JSONPayloadInspector.inspect(Array(text.utf8)) }

    @Test func acceptsObjectsWithAnAPSObject() {
        for text in [
            #"{"aps":{}}"#, #" { "aps" : { "alert" : "x" } } "#,
            #"{"c":"a\"b\\c\u00e9\n","aps":{"badge":-1.5e+3,"sound":null,"x":[true,false,[],{}]}}"#,
            #"{"aps":{"alert":"héllo ✓"}}"#,
        ] {
            #expect(verdict(text) == .valid, "\(text)")
        }
    }

    @Test func anObjectWithoutAPSObjectIsMissingAPS() {
        for text in [#"{}"#, #"{"alert":"x"}"#, #"{"aps":"x"}"#, #"{"x":{"aps":{}}}"#] {
            #expect(verdict(text) == .missingAPS, "\(text)")
        }
    }

    @Test func rejectsWhatRFC8259Rejects() {
        for text in [
            "", "[]", "1", #""aps""#, #"{"aps":{}"#, #"{"aps":{},}"#, #"{"aps":{}} x"#, #"{aps:{}}"#,
            #"{"aps":{'a':1}}"#,
            #"{"aps":{"a":01}}"#, #"{"aps":{"a":1.}}"#, #"{"aps":{"a":"\x"}}"#, "{\"aps\":{\"a\":\"\u{01}\"}}",
            #"{"aps":{"a":tru}}"#, #"{"aps":{"a":"\u12"}}"#, #"{"aps":{}} {"#,
        ] {
            #expect(verdict(text) == .malformed, "\(text)")
            // Foundation's parser tolerates a trailing comma; RFC 8259 (and Apple) do not.
            if text.hasPrefix("{") && !text.contains(",}") {
                #expect((try? JSONSerialization.jsonObject(with: Data(text.utf8))) == nil, "\(text)")
            }
        }
        // Invalid UTF-8.
        #expect(
            JSONPayloadInspector.inspect(Array(#"{"aps":{"a":""#.utf8) + [0xFF] + Array(#""}}"#.utf8)) == .malformed)
        // Absurd nesting.
        #expect(
            verdict(#"{"aps":{"a":"# + String(repeating: "[", count: 100) + String(repeating: "]", count: 100) + "}}")
                == .malformed)
    }
}
