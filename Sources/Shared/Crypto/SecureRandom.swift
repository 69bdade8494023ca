import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's CSPRNG (`RAND_bytes`).
public enum SecureRandom {
    /// `count` random bytes.
    ///
    /// If OpenSSL cannot produce them (its generator failed to seed or is broken)
    /// the process stops: ids, secrets and nonces made from weak randomness are
    /// worse than a crash, and there is no sensible way for a caller to recover.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "SecureRandom.bytes needs a non-negative count")
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        // RAND_bytes takes an Int32 length; large requests go in chunks.
        while offset < count {
            let chunk = min(count - offset, Int(Int32.max))
            let status = bytes.withUnsafeMutableBufferPointer { buffer in
                RAND_bytes(buffer.baseAddress! + offset, Int32(chunk))
            }
            guard status == 1 else {
                fatalError("RAND_bytes failed: \(OpenSSLErrorQueue.drain() ?? "no reason given")")
            }
            offset += chunk
        }
        return bytes
    }
}
