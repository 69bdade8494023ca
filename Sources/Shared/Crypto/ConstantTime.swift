import COpenSSL

/// Comparisons whose running time does not depend on where inputs differ.
public enum ConstantTime {
    /// Whether `lhs` and `rhs` hold the same bytes, in time that depends only on
    /// their lengths (`CRYPTO_memcmp`). Lengths are not secret: inputs of different
    /// lengths compare unequal at once. Use it for secret hashes and MACs.
    public static func equals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        guard !lhs.isEmpty else { return true }
        return lhs.withUnsafeBytes { left in
            rhs.withUnsafeBytes { right in
                CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
            }
        }
    }
}
