import Shared

/// Checks a notification payload without building it: well-formed JSON (RFC 8259,
/// UTF-8, `StrictJSON`) whose top level is an object with an `aps` member that is
/// itself an object. One pass over the bytes with no allocation, because it runs for
/// every request; `JSONSerialization` would cost several times more. Member names
/// given twice are not judged (Apple's answer to them is not known).
enum JSONPayloadInspector {
    enum Verdict: Equatable {
        case valid
        /// Not JSON, or JSON but not an object.
        case malformed
        /// A JSON object without an `aps` object.
        case missingAPS
    }

    static func inspect(_ bytes: [UInt8]) -> Verdict {
        bytes.withUnsafeBufferPointer { inspect($0) }
    }

    static func inspect(_ bytes: UnsafeBufferPointer<UInt8>) -> Verdict {
        switch StrictJSON.check(bytes, uniqueMembers: false, objectMember: "aps") {
        case .malformed, .notAnObject: .malformed
        case .object(let hasAPS): hasAPS ? .valid : .missingAPS
        }
    }
}
