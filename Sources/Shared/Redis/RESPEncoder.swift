/// Writes commands in RESP, the form Redis reads: an array of bulk strings,
/// `*<count>\r\n` then `$<length>\r\n<bytes>\r\n` per argument. Binary safe.
enum RESPEncoder {
    /// Appends `argv` as one command to `buffer`.
    static func append(_ argv: [[UInt8]], to buffer: inout [UInt8]) {
        var size = 16
        for argument in argv { size += argument.count + 16 }
        buffer.reserveCapacity(buffer.count + size)
        buffer.append(UInt8(ascii: "*"))
        appendDecimal(argv.count, to: &buffer)
        for argument in argv {
            buffer.append(UInt8(ascii: "$"))
            appendDecimal(argument.count, to: &buffer)
            buffer.append(contentsOf: argument)
            buffer.append(0x0d)
            buffer.append(0x0a)
        }
    }

    /// `value` (≥ 0) in decimal, then CRLF.
    static func appendDecimal(_ value: Int, to buffer: inout [UInt8]) {
        precondition(value >= 0, "RESP lengths are not negative")
        DecimalText.append(Int64(value), to: &buffer)
        buffer.append(0x0d)
        buffer.append(0x0a)
    }
}
