import Foundation
import Testing

@testable import Shared

/// What the device endpoints, the App API and the admin API accept as a JSON body
/// (`StrictJSON`), beyond what the APNs simulator's payload check covers.
@Suite struct StrictJSONTests {
    @Test func acceptsJSONWithDistinctNames() {
        for text in [
            #"{}"#, #"{"a":1,"b":{"a":2},"c":[{"a":1},{"a":1}]}"#, #" {"é":"\u00e9","e\u0301":true} "#, "[1, 2]",
            #""text""#, "0", #"{"a":{"b":{"c":null}}}"#,
        ] {
            #expect(StrictJSON.isWellFormed(Array(text.utf8)), "\(text)")
        }
    }

    @Test func refusesWhatFoundationLetsThrough() {
        for text in [
            #"{"a":1,}"#, #"[1,]"#, #"{"a":1,"a":2}"#, #"{"token":"x","\u0074oken":"y"}"#,
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

    /// The simulator's check does not judge repeated names (Apple's answer is not known).
    @Test func repeatsAreOnlyRefusedOnRequest() {
        let repeated = Array(#"{"aps":{},"aps":{}}"#.utf8)
        #expect(StrictJSON.check(repeated, uniqueMembers: false, objectMember: "aps") == .object(hasObjectMember: true))
        #expect(StrictJSON.check(repeated, uniqueMembers: true, objectMember: "aps") == .malformed)
    }
}
