import Foundation

/// An IPv4 or IPv6 network, e.g. `10.0.0.0/8` or `fd00::/8`, for `TRUSTED_PROXIES`.
public struct CIDR: Sendable, Equatable, CustomStringConvertible {
    /// Network address bytes (4 or 16), already masked.
    public let network: [UInt8]
    public let prefixLength: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let address = Self.parseAddress(String(parts[0])) else { return nil }
        let maximum = address.count * 8
        let prefix: Int
        if parts.count == 2 {
            guard let value = Int(parts[1]), (0...maximum).contains(value) else { return nil }
            prefix = value
        } else {
            prefix = maximum
        }
        // An IPv4-mapped network (`::ffff:a.b.c.d/n`, n ≥ 96) is that IPv4 network:
        // clients arrive as IPv4 addresses, even over a dual-stack socket.
        if address.count == 16, prefix >= 96, Self.isIPv4Mapped(address) {
            self.prefixLength = prefix - 96
            self.network = Self.mask(Array(address[12...]), prefix: prefix - 96)
            return
        }
        self.prefixLength = prefix
        self.network = Self.mask(address, prefix: prefix)
    }

    /// Whether 16 address bytes are an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
    public static func isIPv4Mapped(_ bytes: [UInt8]) -> Bool {
        bytes.count == 16 && bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
    }

    /// Whether `address` (textual IPv4 or IPv6) lies in this network.
    public func contains(_ address: String) -> Bool {
        guard let bytes = Self.parseAddress(address) else { return false }
        return contains(bytes)
    }

    public func contains(_ bytes: [UInt8]) -> Bool {
        var candidate = bytes
        // An IPv4-mapped IPv6 address (::ffff:a.b.c.d) matches IPv4 networks.
        if network.count == 4, Self.isIPv4Mapped(bytes) { candidate = Array(bytes[12...]) }
        guard candidate.count == network.count else { return false }
        return Self.mask(candidate, prefix: prefixLength) == network
    }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = network.count == 4 ? AF_INET : AF_INET6
        network.withUnsafeBytes { _ = inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        let text = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return "\(text)/\(prefixLength)"
    }

    /// Parses a textual IPv4 or IPv6 address into 4 or 16 bytes.
    public static func parseAddress(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    private static func mask(_ bytes: [UInt8], prefix: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let bits = min(max(prefix - index * 8, 0), 8)
            return bits == 8 ? byte : byte & ~(UInt8(0xff) >> bits)
        }
    }
}
