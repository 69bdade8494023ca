import Foundation
import Testing

@testable import Shared

/// What the device endpoints, the App API and the admin API accept as a JSON body
/// (`StrictJSON`), beyond what the APNs simulator's payload check covers.
@Suite struct StrictJSONTests {
    @Test func acceptsJSONWithDistinctNames() {
        for text in [
            #"{}"#, #"{"a":1,"b":{"a":2},"c":[{"a":1},{"a":1}]}"#, #" {"é":"\u00e9","e":true} "#, "[1, 2]",
            #""text""#, "0", #"{"a":{"b":{"c":null}}}"#, #"{"\ud83d\ude00":1,"\u00e9\n\"\\/":2}"#,
        ] {
            #expect(StrictJSON.isWellFormed(Array(text.utf8)), "\(text)")
        }
    }

    @Test func refusesWhatFoundationLetsThrough() {
        for text in [
            #"{"a":1,}"#, #"[1,]"#, #"{"a":1,"a":2}"#, #"{"token":"x","\u0074oken":"y"}"#,
            // One name to a decoder, which compares canonically: é and e + combining acute;
            // K and the Kelvin sign; a lone surrogate escape names no character at all.
            #"{"é":1,"e\u0301":2}"#, #"{"privateKey":1,"private\u212Aey":2}"#, #"{"\ud800":1}"#,
            #"{"o":{"k":1,"k":1}}"#, "\u{FEFF}{}", #"{"a":01}"#,
            String(repeating: "[", count: 65) + String(repeating: "]", count: 65),
        ] {
            #expect(!StrictJSON.isWellFormed(Array(text.utf8)), "\(text)")
        }
        // UTF-16 (with and without its mark) and invalid UTF-8 in a member a decoder skips.
        #expect(!StrictJSON.isWellFormed(Array(#"{"a":1}"#.utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })))
        #expect(!StrictJSON.isWellFormed([0xFF, 0xFE] + Array(#"{"a":1}"#.utf16.flatMap { [UInt8($0 & 0xFF), 0] })))
        #expect(!StrictJSON.isWellFormed(Array(#"{"x":""#.utf8) + [0xFF] + Array(#"","a":1}"#.utf8)))
    }

    /// An object of many names (an App API body may hold 1.1 MB): a repeat at its end
    /// is found. (Names are looked up in a set; comparing each with every earlier one
    /// let one request take the CPU for minutes.)
    @Test func aRepeatAmongManyNamesIsFound() {
        let many = "{" + (0..<50_000).map { #""n\#($0)":0"# }.joined(separator: ",") + "}"
        #expect(StrictJSON.isWellFormed(Array(many.utf8)))
        #expect(!StrictJSON.isWellFormed(Array((many.dropLast() + #","n7":1}"#).utf8)))
    }

    /// The simulator's check does not judge repeated names (Apple's answer is not known).
    @Test func repeatsAreOnlyRefusedOnRequest() {
        let repeated = Array(#"{"aps":{},"aps":{}}"#.utf8)
        #expect(StrictJSON.check(repeated, uniqueMembers: false, objectMember: "aps") == .object(hasObjectMember: true))
        #expect(StrictJSON.check(repeated, uniqueMembers: true, objectMember: "aps") == .malformed)
    }
}
