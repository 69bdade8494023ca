/// Integers in decimal as bytes, exactly as `String(value)` writes them, without
/// building the String: for values written into protocol buffers (RESP arguments
/// and lengths, HTTP/2 header values) many times per message.
enum DecimalText {
    /// Calls `body` with the sign and digits of `value`, held on the stack.
    static func withBytes<Result>(of value: Int64, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        // 19 digits and a sign hold any Int64.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var magnitude = value.magnitude
            var start = digits.count
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                start -= 1
                digits[start] = UInt8(ascii: "-")
            }
            return body(UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    static func append(_ value: Int64, to bytes: inout [UInt8]) {
        withBytes(of: value) { bytes.append(contentsOf: $0) }
    }
}
