import COpenSSL
import CShims

/// A memory `BIO`, freed when this goes away. Used by one call, never shared.
final class MemoryBIO {
    let pointer: OpaquePointer

    /// An empty, writable memory BIO.
    init() throws {
        guard let pointer = BIO_new(BIO_s_mem()) else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "BIO_new failed")
        }
        self.pointer = pointer
    }

    /// A memory BIO holding a copy of `text`'s UTF-8 bytes.
    init(copying text: String) throws {
        guard let pointer = BIO_new(BIO_s_mem()) else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "BIO_new failed")
        }
        self.pointer = pointer
        let bytes = Array(text.utf8)
        if !bytes.isEmpty {
            guard BIO_write(pointer, bytes, Int32(bytes.count)) == Int32(bytes.count) else {
                throw CryptoError.fromOpenSSL(.openSSLFailure, "BIO_write failed")
            }
        }
    }

    deinit { BIO_free(pointer) }

    /// Everything written to the BIO so far, as text.
    func text() -> String {
        var data: UnsafeMutablePointer<CChar>?
        let length = pg_shim_BIO_get_mem_data(pointer, &data)
        guard length > 0, let data else { return "" }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
            String(decoding: UnsafeBufferPointer(start: bytes, count: length), as: UTF8.self)
        }
    }
}

/// A password callback that refuses: an encrypted PEM fails to load instead of
/// OpenSSL's default callback prompting on the terminal.
func refusingPasswordCallback(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int32, _ writing: Int32, _ userData: UnsafeMutableRawPointer?
) -> Int32 {
    -1
}

/// P-256 facts and checks shared by the key types.
enum P256 {
    /// OpenSSL's name for the P-256 group (`SN_X9_62_prime256v1`).
    static let groupName = "prime256v1"
    /// Byte length of a field element and of each half of a raw signature.
    static let coordinateByteCount = 32
    /// Byte length of an uncompressed point: 0x04 || X || Y.
    static let uncompressedPointByteCount = 65

    /// Throws `unsupportedKeyType` unless `key` is an EC key on P-256.
    static func requireP256(_ key: OpaquePointer) throws {
        guard EVP_PKEY_is_a(key, "EC") == 1 else {
            throw CryptoError(.unsupportedKeyType, "the key is not an EC key")
        }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, &name, name.count, &length) == 1 else {
            throw CryptoError.fromOpenSSL(.unsupportedKeyType, "the EC key names no curve")
        }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard group == groupName else {
            throw CryptoError(.unsupportedKeyType, "the EC key is on \(group), not P-256")
        }
    }

    /// The uncompressed public point (0x04 || X || Y) of an EC key on P-256, built
    /// from its affine coordinates, whatever point format the key was encoded with
    /// (a PKCS#8 file may carry a compressed public key). Does not modify the key.
    static func uncompressedPoint(of key: OpaquePointer) throws -> [UInt8] {
        var point = [UInt8](repeating: 0, count: uncompressedPointByteCount)
        point[0] = 0x04
        for (index, name) in [OSSL_PKEY_PARAM_EC_PUB_X, OSSL_PKEY_PARAM_EC_PUB_Y].enumerated() {
            var coordinate: OpaquePointer?
            guard EVP_PKEY_get_bn_param(key, name, &coordinate) == 1, let coordinate else {
                throw CryptoError.fromOpenSSL(.openSSLFailure, "could not read the public point of the key")
            }
            defer { BN_free(coordinate) }
            let written = point.withUnsafeMutableBufferPointer { buffer in
                BN_bn2binpad(
                    coordinate, buffer.baseAddress! + 1 + index * coordinateByteCount, Int32(coordinateByteCount))
            }
            guard written == Int32(coordinateByteCount) else {
                throw CryptoError(.openSSLFailure, "a public key coordinate exceeds 32 bytes")
            }
        }
        return point
    }

    /// Converts an ECDSA signature from DER (what OpenSSL makes) to raw R || S,
    /// each 32 bytes big-endian, left-padded (what JWS ES256 uses).
    static func rawSignature(fromDER der: [UInt8]) throws -> [UInt8] {
        let signature: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let signature else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "OpenSSL made an ECDSA signature that does not parse")
        }
        defer { ECDSA_SIG_free(signature) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(signature, &r, &s)
        var raw = [UInt8](repeating: 0, count: 2 * coordinateByteCount)
        let written = raw.withUnsafeMutableBufferPointer { buffer in
            (
                BN_bn2binpad(r, buffer.baseAddress!, Int32(coordinateByteCount)),
                BN_bn2binpad(s, buffer.baseAddress! + coordinateByteCount, Int32(coordinateByteCount))
            )
        }
        guard written.0 == Int32(coordinateByteCount), written.1 == Int32(coordinateByteCount) else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "an ECDSA signature component exceeds 32 bytes")
        }
        return raw
    }

    /// Converts a raw R || S signature (64 bytes) to DER, for OpenSSL to verify.
    /// Nil if it is not 64 bytes or OpenSSL cannot encode it.
    static func derSignature(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 2 * coordinateByteCount, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let components = raw.withUnsafeBufferPointer { buffer in
            (
                BN_bin2bn(buffer.baseAddress!, Int32(coordinateByteCount), nil),
                BN_bin2bn(buffer.baseAddress! + coordinateByteCount, Int32(coordinateByteCount), nil)
            )
        }
        guard let r = components.0, let s = components.1, ECDSA_SIG_set0(signature, r, s) == 1 else {
            // On failure ECDSA_SIG_set0 takes neither number; free whatever was made.
            BN_free(components.0)
            BN_free(components.1)
            return nil
        }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer in
            var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        return written == length ? der : nil
    }
}
