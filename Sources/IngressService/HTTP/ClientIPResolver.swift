import Foundation
import Shared

/// The client address that per-IP limits are keyed by: the socket peer, or, when
/// the peer is a trusted proxy (`TRUSTED_PROXIES`), the right-most `X-Forwarded-For`
/// hop that is not itself a trusted proxy. Hops left of that one could be forged
/// by the client and are ignored.
///
/// IPv6 clients are keyed by their /64 (one customer network), IPv4-mapped IPv6
/// addresses as IPv4.
struct ClientIPResolver: Sendable {
    let trustedProxies: [CIDR]

    func clientAddress(_ head: HTTPRequestHead) -> [UInt8] {
        var address = Self.normalized(head.peerAddress)
        guard !trustedProxies.isEmpty, isTrusted(address) else { return address }
        let hops = head.headers.values("X-Forwarded-For").flatMap { $0.split(separator: ",") }
        for hop in hops.reversed() {
            let text = hop.trimmingCharacters(in: .whitespaces)
            guard let bytes = CIDR.parseAddress(Self.strippingPort(text)) else { break }
            address = Self.normalized(bytes)
            if !isTrusted(address) { break }
        }
        return address
    }

    /// The key text for `clientAddress`: dotted IPv4, or the /64 of IPv6 in hex.
    func clientKey(_ head: HTTPRequestHead) -> String {
        let address = clientAddress(head)
        if address.count == 4 { return address.map(String.init).joined(separator: ".") }
        if address.count == 16 {
            let groups = stride(from: 0, to: 8, by: 2).map {
                String(UInt16(address[$0]) << 8 | UInt16(address[$0 + 1]), radix: 16)
            }
            return groups.joined(separator: ":") + "::/64"
        }
        return "unknown"
    }

    private func isTrusted(_ address: [UInt8]) -> Bool {
        trustedProxies.contains { $0.contains(address) }
    }

    static func normalized(_ bytes: [UInt8]) -> [UInt8] {
        if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            return Array(bytes[12...])
        }
        return bytes
    }

    /// `1.2.3.4:5678` → `1.2.3.4`, `[::1]:80` → `::1` (some proxies add ports).
    static func strippingPort(_ text: String) -> String {
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            return String(text[text.index(after: text.startIndex)..<close])
        }
        if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            return String(text[..<colon])
        }
        return text
    }
}
