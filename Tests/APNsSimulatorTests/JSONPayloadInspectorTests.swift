import Foundation
import Shared
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

    @Test func theUTF8CheckAgreesWithTheStandardLibrary() {
        // Boundaries of Unicode Table 3-7: overlong forms, surrogates, past U+10FFFF, truncation.
        var samples: [[UInt8]] = [
            [], [0x41], [0x7F], [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xC2, 0x80], [0xDF, 0xBF], [0xDF],
            [0xE0, 0x9F, 0x80], [0xE0, 0xA0, 0x80], [0xE1, 0x80, 0x80], [0xEC, 0xBF, 0xBF], [0xED, 0x9F, 0xBF],
            [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF], [0xEE, 0x80, 0x80], [0xEF, 0xBF, 0xBF], [0xEF, 0xBF],
            [0xF0, 0x8F, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80], [0xF3, 0xBF, 0xBF, 0xBF], [0xF4, 0x8F, 0xBF, 0xBF],
            [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xF0, 0x90, 0x80], [0xE2, 0x82, 0xAC, 0x41],
            [0xE2, 0x41, 0xAC], [0xF0, 0x90, 0x41, 0x80],
        ]
        // And random runs of bytes that start, continue or break sequences.
        let interesting: [UInt8] = [0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xF5]
        for _ in 0..<5000 {
            samples.append(
                (0..<Int.random(in: 1...6)).map { _ in
                    Bool.random() ? interesting.randomElement()! : UInt8.random(in: 0...255)
                })
        }
        for sample in samples {
            let expected = String(validating: sample, as: UTF8.self) != nil
            let actual = sample.withUnsafeBufferPointer { StrictJSON.isValidUTF8($0) }
            #expect(actual == expected, "\(sample)")
        }
    }

    /// String contents are skipped eight bytes at a time: a quote, backslash, control
    /// or non-ASCII byte is seen at every offset of a long string.
    @Test func everyByteOfALongStringIsChecked() {
        let plain = String(repeating: "abcdefgh", count: 8)
        for offset in 0...plain.utf8.count {
            func payload(_ inserted: String) -> [UInt8] {
                let index = plain.utf8.index(plain.startIndex, offsetBy: offset)
                return Array(#"{"aps":{},"c":""#.utf8) + Array(plain.utf8[..<index]) + Array(inserted.utf8)
                    + Array(plain.utf8[index...]) + Array(#""}"#.utf8)
            }
            #expect(JSONPayloadInspector.inspect(payload("")) == .valid)
            #expect(JSONPayloadInspector.inspect(payload(#"\""#)) == .valid)
            #expect(JSONPayloadInspector.inspect(payload("é✓")) == .valid)
            #expect(JSONPayloadInspector.inspect(payload("\"")) == .malformed, "offset \(offset)")
            #expect(JSONPayloadInspector.inspect(payload("\u{1F}")) == .malformed, "offset \(offset)")
            #expect(JSONPayloadInspector.inspect(payload("\\q")) == .malformed, "offset \(offset)")
            var invalid = payload("")
            invalid.insert(0xC0, at: 15 + offset)
            #expect(JSONPayloadInspector.inspect(invalid) == .malformed, "offset \(offset)")
        }
    }

    @Test func utf8InStringsIsCheckedAsTheStandardLibraryChecksIt() {
        let interesting: [UInt8] = [0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC2, 0xE0, 0xED, 0xF0, 0xF4, 0xF5]
        for _ in 0..<3000 {
            let sample = (0..<Int.random(in: 1...12)).map { _ in interesting.randomElement()! }
            let payload = Array(#"{"aps":{"alert":""#.utf8) + sample + Array(#""}}"#.utf8)
            let expected: JSONPayloadInspector.Verdict =
                String(validating: sample, as: UTF8.self) != nil ? .valid : .malformed
            #expect(JSONPayloadInspector.inspect(payload) == expected, "\(sample)")
        }
    }
}
