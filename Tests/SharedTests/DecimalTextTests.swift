import Testing

@testable import Shared

@Suite struct DecimalTextTests {
    @Test func writesWhatStringWrites() {
        for value: Int64 in [0, 1, 9, 10, -1, -10, 1_700_000_000_123, .max, .min] {
            var bytes: [UInt8] = [UInt8(ascii: "x")]
            DecimalText.append(value, to: &bytes)
            #expect(bytes == Array(("x" + String(value)).utf8))
        }
        var resp: [UInt8] = []
        RESPEncoder.appendDecimal(120, to: &resp)
        #expect(resp == Array("120\r\n".utf8))
    }
}
