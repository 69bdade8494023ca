import COpenSSL

/// A Lua script run by SHA (`EVALSHA`). The SHA-1 is computed here, so the
/// script's text is only sent when the server does not know it yet (`SCRIPT
/// LOAD` on a connection's first use of it, and again after a NOSCRIPT reply).
public struct RedisScript: Sendable, Hashable {
    public let source: String
    /// Lower-case hex SHA-1 of `source`, as Redis computes it.
    public let sha1: String

    public init(source: String) {
        self.source = source
        sha1 = Self.sha1Hex(Array(source.utf8))
    }

    static func sha1Hex(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &length, EVP_sha1(), nil)
        }
        precondition(ok == 1 && length == 20, "OpenSSL SHA-1 failed")
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(40)
        for byte in digest.prefix(20) {
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

extension RedisScript {
    /// Deletes KEYS[1] only if it holds ARGV[1] (a lock or lease still ours, a
    /// tombstone still that app's): 1 if deleted, else 0.
    public static let deleteIfHolding = RedisScript(
        source: "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end")
}
