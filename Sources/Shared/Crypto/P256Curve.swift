import COpenSSL

/// Membership of P-256 for uncompressed points, cheap enough for every push (under
/// a microsecond): the group is built once and shared, which openssl-threads(7)
/// allows for an object no thread modifies (every call here takes it `const`).
public final class P256Curve: @unchecked Sendable {
    /// The one instance: immutable after `init`, so a shared constant rather than state.
    public static let shared = P256Curve()

    /// The owned `EC_GROUP`, never freed (it lives as long as the process).
    private let group: OpaquePointer

    private init() {
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else {
            fatalError("OpenSSL has no P-256 group")
        }
        self.group = group
    }

    /// Whether `point` is 0x04 || X || Y (65 bytes) with (X, Y) on the curve:
    /// `EC_POINT_oct2point` checks the curve equation for an uncompressed point.
    public func contains(uncompressedPoint point: ArraySlice<UInt8>) -> Bool {
        guard point.count == P256.uncompressedPointByteCount, point.first == 0x04,
            let decoded = EC_POINT_new(group)
        else { return false }
        defer { EC_POINT_free(decoded) }
        let onCurve = point.withUnsafeBufferPointer { bytes in
            EC_POINT_oct2point(group, decoded, bytes.baseAddress, bytes.count, nil) == 1
        }
        if !onCurve { OpenSSLErrorQueue.drain() }
        return onCurve
    }
}
