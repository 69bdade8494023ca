import COpenSSL
import CShims

/// A P-256 (secp256r1) public key: verifies ES256 signatures, validates Web Push
/// `keys.p256dh`, and converts between SPKI PEM and the raw uncompressed point.
///
/// `@unchecked Sendable`: the `EVP_PKEY` is never modified after `init`, and each
/// verification uses its own `EVP_MD_CTX`; openssl-threads(7) documents concurrent
/// use of an unmodified key with separate contexts as safe.
public final class P256PublicKey: @unchecked Sendable, Equatable, CustomStringConvertible {
    /// The owned `EVP_PKEY`, freed once in `deinit`.
    let pointer: OpaquePointer

    /// The point as 0x04 || X || Y (65 bytes), as Web Push sends `p256dh`.
    public let uncompressedPoint: [UInt8]

    /// The key of an uncompressed point, 0x04 || X || Y (SEC 1 §2.3.3, 65 bytes).
    ///
    /// Throws `invalidPointLength` (not 65 bytes), `invalidPointFormat` (first byte
    /// not 0x04, e.g. a compressed point), or `pointNotOnCurve`.
    public init(uncompressedPoint point: [UInt8]) throws {
        guard point.count == P256.uncompressedPointByteCount else {
            throw CryptoError(.invalidPointLength, "a P-256 uncompressed point must be 65 bytes, got \(point.count)")
        }
        guard point[0] == 0x04 else {
            throw CryptoError(.invalidPointFormat, "a P-256 uncompressed point must start with 0x04")
        }
        try Self.requireOnCurve(point)
        guard let key = pg_shim_ec_public_key_from_point(P256.groupName, point, point.count) else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "EVP_PKEY_fromdata refused a point on the curve")
        }
        self.pointer = key
        self.uncompressedPoint = point
    }

    /// The key of a PEM `-----BEGIN PUBLIC KEY-----` block (SubjectPublicKeyInfo).
    /// Throws `invalidKeyEncoding` or, for another key type or curve, `unsupportedKeyType`.
    public convenience init(pemRepresentation pem: String) throws {
        let bio = try MemoryBIO(copying: pem)
        guard let key = PEM_read_bio_PUBKEY(bio.pointer, nil, refusingPasswordCallback, nil) else {
            throw CryptoError.fromOpenSSL(
                .invalidKeyEncoding, "the text holds no PEM public key (SubjectPublicKeyInfo)")
        }
        try self.init(taking: key)
    }

    /// Takes ownership of `key` (freeing it if it is not a P-256 key).
    init(taking key: OpaquePointer) throws {
        do {
            try P256.requireP256(key)
            self.uncompressedPoint = try P256.uncompressedPoint(of: key)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        self.pointer = key
    }

    deinit { EVP_PKEY_free(pointer) }

    /// The key as a PEM `-----BEGIN PUBLIC KEY-----` block (SubjectPublicKeyInfo).
    public var pemRepresentation: String {
        get throws {
            let bio = try MemoryBIO()
            guard PEM_write_bio_PUBKEY(bio.pointer, pointer) == 1 else {
                throw CryptoError.fromOpenSSL(.openSSLFailure, "PEM_write_bio_PUBKEY failed")
            }
            return bio.text()
        }
    }

    /// Whether `signature`, raw R || S (64 bytes), is a valid ECDSA-SHA-256
    /// signature of `message` under this key. Anything malformed is false.
    public func isValidSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        guard let der = P256.derSignature(fromRaw: signature), let context = EVP_MD_CTX_new() else {
            OpenSSLErrorQueue.drain()
            return false
        }
        defer { EVP_MD_CTX_free(context) }
        let valid =
            EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pointer) == 1
            && message.withUnsafeBufferPointer { input in
                EVP_DigestVerify(context, der, der.count, input.baseAddress, input.count) == 1
            }
        // A rejected signature leaves reasons in the queue; they are expected here.
        OpenSSLErrorQueue.drain()
        return valid
    }

    public static func == (lhs: P256PublicKey, rhs: P256PublicKey) -> Bool {
        lhs.uncompressedPoint == rhs.uncompressedPoint
    }

    public var description: String { "P256PublicKey(\(Base64URL.encode(uncompressedPoint)))" }

    /// Throws `pointNotOnCurve` unless the encoded point decodes onto P-256.
    private static func requireOnCurve(_ point: [UInt8]) throws {
        guard P256Curve.shared.contains(uncompressedPoint: point[...]) else {
            throw CryptoError(.pointNotOnCurve, "the point is not on the P-256 curve")
        }
    }
}
