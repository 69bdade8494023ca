import COpenSSL
import Synchronization

/// Membership of P-256 for uncompressed points, cheap enough for every push (under
/// a microsecond): the group is built once and shared, which openssl-threads(7)
/// allows for an object no thread modifies (every call here takes it `const`).
public final class P256Curve: @unchecked Sendable {
    /// The one instance: immutable after `init`, so a shared constant rather than state.
    public static let shared = P256Curve()

    /// The owned `EC_GROUP`, never freed (it lives as long as the process).
    private let group: OpaquePointer
    /// Decoding scratch, reused: a fresh point and `BN_CTX` per push were some fifteen
    /// allocations. One per thread decoding at once, so the list is as long as the
    /// most concurrent checks.
    private let idle = Mutex<[Scratch]>([])

    /// A point to decode into and the `BN_CTX` for its arithmetic, kept for the
    /// process's life. Why @unchecked Sendable is safe: one thread at a time holds it,
    /// the one that took it from `idle`, until it puts it back.
    private struct Scratch: @unchecked Sendable {
        let point: OpaquePointer
        let context: OpaquePointer
    }

    private init() {
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else {
            fatalError("OpenSSL has no P-256 group")
        }
        self.group = group
    }

    /// Whether `point` is 0x04 || X || Y (65 bytes) with (X, Y) on the curve:
    /// `EC_POINT_oct2point` checks the curve equation for an uncompressed point.
    public func contains(uncompressedPoint point: ArraySlice<UInt8>) -> Bool {
        guard point.count == P256.uncompressedPointByteCount, point.first == 0x04, let scratch = borrowScratch()
        else { return false }
        defer { idle.withLock { $0.append(scratch) } }
        let onCurve = point.withUnsafeBufferPointer { bytes in
            EC_POINT_oct2point(group, scratch.point, bytes.baseAddress, bytes.count, scratch.context) == 1
        }
        if !onCurve { OpenSSLErrorQueue.drain() }
        return onCurve
    }

    /// An idle scratch, or a new one (nil only when OpenSSL cannot allocate).
    private func borrowScratch() -> Scratch? {
        if let scratch = idle.withLock({ $0.popLast() }) { return scratch }
        guard let point = EC_POINT_new(group) else { return nil }
        guard let context = BN_CTX_new() else {
            EC_POINT_free(point)
            return nil
        }
        return Scratch(point: point, context: context)
    }
}
