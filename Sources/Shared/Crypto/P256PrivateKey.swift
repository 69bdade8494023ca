import COpenSSL
import CShims

/// A P-256 (secp256r1) private key: an APNs token-signing key (`.p8`) or one made
/// on the fly. Signs with ECDSA over SHA-256 and returns raw R || S, as ES256 JWTs need.
///
/// `@unchecked Sendable`: the `EVP_PKEY` is never modified after `init`, and each
/// signature uses its own `EVP_MD_CTX`; openssl-threads(7) documents concurrent use
/// of an unmodified key with separate contexts as safe, so one key can sign
/// provider tokens for many connections at once.
public final class P256PrivateKey: @unchecked Sendable, CustomStringConvertible {
    /// The owned `EVP_PKEY`, freed once in `deinit`.
    let pointer: OpaquePointer

    /// The public half.
    public let publicKey: P256PublicKey

    /// The key of an unencrypted PEM private key: PKCS#8 `-----BEGIN PRIVATE KEY-----`
    /// as in Apple's `.p8` files (SEC 1 `BEGIN EC PRIVATE KEY` is read as well).
    /// Throws `invalidKeyEncoding` for text holding no such key (including an
    /// encrypted one) and `unsupportedKeyType` for a key that is not EC on P-256.
    public convenience init(pemRepresentation pem: String) throws {
        let bio = try MemoryBIO(copying: pem)
        guard let key = PEM_read_bio_PrivateKey(bio.pointer, nil, refusingPasswordCallback, nil) else {
            throw CryptoError.fromOpenSSL(.invalidKeyEncoding, "the text holds no unencrypted PEM private key")
        }
        try self.init(taking: key)
    }

    /// Takes ownership of `key` (freeing it if it is not a P-256 key).
    init(taking key: OpaquePointer) throws {
        do {
            try P256.requireP256(key)
            guard Self.hasPrivatePart(key) else {
                throw CryptoError(.invalidKeyEncoding, "the key has no private part")
            }
            self.publicKey = try P256PublicKey(uncompressedPoint: P256.uncompressedPoint(of: key))
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        self.pointer = key
    }

    /// A new random key.
    public static func generate() throws -> P256PrivateKey {
        guard let key = pg_shim_EVP_EC_gen("P-256") else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "EVP_EC_gen(P-256) failed")
        }
        return try P256PrivateKey(taking: key)
    }

    deinit { EVP_PKEY_free(pointer) }

    /// The key as unencrypted PKCS#8 PEM, `-----BEGIN PRIVATE KEY-----` (the `.p8` format).
    public var pemRepresentation: String {
        get throws {
            let bio = try MemoryBIO()
            guard PEM_write_bio_PrivateKey(bio.pointer, pointer, nil, nil, 0, nil, nil) == 1 else {
                throw CryptoError.fromOpenSSL(.openSSLFailure, "PEM_write_bio_PrivateKey failed")
            }
            return bio.text()
        }
    }

    /// The ECDSA P-256 / SHA-256 signature of `message` as raw R || S: 64 bytes,
    /// each half big-endian and left-padded to 32 bytes (JWS `ES256`, RFC 7518 §3.4).
    /// ECDSA is randomized, so two signatures of one message differ.
    public func signature(for message: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "EVP_MD_CTX_new failed")
        }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1 else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "EVP_DigestSignInit failed")
        }
        // An ECDSA P-256 DER signature is at most 72 bytes; ask for the bound anyway.
        var length = 0
        guard EVP_DigestSign(context, nil, &length, nil, 0) == 1, length > 0 else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "EVP_DigestSign could not size the signature")
        }
        var der = [UInt8](repeating: 0, count: length)
        let status = message.withUnsafeBufferPointer { input in
            EVP_DigestSign(context, &der, &length, input.baseAddress, input.count)
        }
        guard status == 1 else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "EVP_DigestSign failed")
        }
        return try P256.rawSignature(fromDER: Array(der[..<length]))
    }

    /// Never shows key material; the public point identifies the key.
    public var description: String { "P256PrivateKey(public: \(Base64URL.encode(publicKey.uncompressedPoint)))" }

    private static func hasPrivatePart(_ key: OpaquePointer) -> Bool {
        var scalar: OpaquePointer?
        guard EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_PRIV_KEY, &scalar) == 1, let scalar else {
            OpenSSLErrorQueue.drain()
            return false
        }
        BN_clear_free(scalar)
        return true
    }
}
