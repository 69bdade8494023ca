import COpenSSL

/// SHA-256 (FIPS 180-4) through OpenSSL's EVP digest API.
public enum SHA256 {
    /// The digest length in bytes.
    public static let byteCount = 32

    /// The 32-byte SHA-256 digest of `bytes`.
    public static func hash(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        let status = bytes.withUnsafeBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &length, EVP_sha256(), nil)
        }
        // EVP_Digest with the built-in SHA-256 only fails if OpenSSL itself is broken
        // (no default provider, out of memory); a wrong digest must never be returned.
        guard status == 1, length == UInt32(byteCount) else {
            fatalError("SHA-256 failed inside OpenSSL: \(OpenSSLErrorQueue.drain() ?? "no reason given")")
        }
        return digest
    }

    /// The SHA-256 digest of the UTF-8 bytes of `text`.
    public static func hash(_ text: String) -> [UInt8] {
        hash(Array(text.utf8))
    }
}
