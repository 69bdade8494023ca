import COpenSSL

/// Seals secrets at rest (the `.p8` keys of push credentials) with AES-256-GCM
/// under `CREDENTIAL_KEY`.
///
/// A sealed blob is `version(1) || nonce(12) || ciphertext || tag(16)`; version 1
/// is AES-256-GCM with a fresh random 96-bit nonce per seal. The version byte and
/// the caller's associated data are both authenticated, so a blob only opens with
/// the same key and the same associated data (e.g. the credential's id), and any
/// changed bit is detected.
public struct AESGCMSealer: Sendable, CustomStringConvertible {
    public static let version: UInt8 = 1
    public static let keyByteCount = 32
    public static let nonceByteCount = 12
    public static let tagByteCount = 16
    /// The overhead a seal adds to the plaintext: version, nonce and tag.
    public static let overhead = 1 + nonceByteCount + tagByteCount

    private let key: [UInt8]

    /// A sealer with a 32-byte key; any other length throws `invalidKeyLength`.
    public init(key: [UInt8]) throws {
        guard key.count == Self.keyByteCount else {
            throw CryptoError(.invalidKeyLength, "an AES-256-GCM key must be 32 bytes, got \(key.count)")
        }
        self.key = key
    }

    /// A sealer with the configured `CREDENTIAL_KEY`.
    public init(configuration: CommonConfiguration) throws {
        try self.init(key: configuration.credentialKey)
    }

    /// Never shows the key.
    public var description: String { "AESGCMSealer(version: \(Self.version), key: <redacted>)" }

    /// `plaintext` sealed under a fresh random nonce, bound to `associatedData`.
    public func seal(_ plaintext: [UInt8], associatedData: [UInt8]) throws -> [UInt8] {
        try seal(plaintext, nonce: SecureRandom.bytes(Self.nonceByteCount), associatedData: associatedData)
    }

    /// The plaintext of a blob made by `seal` with the same key and associated data.
    /// Throws `malformedSealedData` (too short), `unsupportedSealVersion`, or
    /// `authenticationFailed` (any change to the blob, another key, other
    /// associated data); no plaintext is returned unless the tag verifies.
    public func open(_ sealed: [UInt8], associatedData: [UInt8]) throws -> [UInt8] {
        guard sealed.count >= Self.overhead else {
            throw CryptoError(
                .malformedSealedData, "a sealed blob needs at least \(Self.overhead) bytes, got \(sealed.count)")
        }
        guard sealed[0] == Self.version else {
            throw CryptoError(.unsupportedSealVersion, "sealed blob version \(sealed[0]) is not supported")
        }
        let nonce = Array(sealed[1..<(1 + Self.nonceByteCount)])
        let ciphertext = Array(sealed[(1 + Self.nonceByteCount)..<(sealed.count - Self.tagByteCount)])
        var tag = Array(sealed[(sealed.count - Self.tagByteCount)...])
        let aad = [Self.version] + associatedData

        let context = try CipherContext()
        var plaintext = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var length: Int32 = 0
        var total = 0
        try context.check(EVP_DecryptInit_ex(context.pointer, EVP_aes_256_gcm(), nil, nil, nil), "init")
        try context.check(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_IVLEN, Int32(Self.nonceByteCount), nil),
            "set nonce length")
        try context.check(EVP_DecryptInit_ex(context.pointer, nil, nil, key, nonce), "set key and nonce")
        try context.check(EVP_DecryptUpdate(context.pointer, nil, &length, aad, Int32(aad.count)), "associated data")
        if !ciphertext.isEmpty {
            try context.check(
                EVP_DecryptUpdate(context.pointer, &plaintext, &length, ciphertext, Int32(ciphertext.count)), "decrypt")
            total = Int(length)
        }
        try context.check(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_TAG, Int32(Self.tagByteCount), &tag), "set tag")
        let verified = plaintext.withUnsafeMutableBufferPointer { buffer in
            EVP_DecryptFinal_ex(context.pointer, buffer.baseAddress! + total, &length)
        }
        guard verified == 1 else {
            OpenSSLErrorQueue.drain()
            plaintext.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
            throw CryptoError(
                .authenticationFailed, "the sealed blob does not authenticate with this key and associated data")
        }
        total += Int(length)
        return Array(plaintext[..<total])
    }

    /// Seals with a given nonce. Internal: only known-answer tests pass a nonce;
    /// reusing a nonce under one key breaks GCM.
    func seal(_ plaintext: [UInt8], nonce: [UInt8], associatedData: [UInt8]) throws -> [UInt8] {
        precondition(nonce.count == Self.nonceByteCount, "AES-GCM nonce must be 12 bytes")
        let aad = [Self.version] + associatedData
        let context = try CipherContext()
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count + 16)
        var length: Int32 = 0
        var total = 0
        try context.check(EVP_EncryptInit_ex(context.pointer, EVP_aes_256_gcm(), nil, nil, nil), "init")
        try context.check(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_SET_IVLEN, Int32(Self.nonceByteCount), nil),
            "set nonce length")
        try context.check(EVP_EncryptInit_ex(context.pointer, nil, nil, key, nonce), "set key and nonce")
        try context.check(EVP_EncryptUpdate(context.pointer, nil, &length, aad, Int32(aad.count)), "associated data")
        if !plaintext.isEmpty {
            try context.check(
                EVP_EncryptUpdate(context.pointer, &ciphertext, &length, plaintext, Int32(plaintext.count)), "encrypt")
            total = Int(length)
        }
        let finished = ciphertext.withUnsafeMutableBufferPointer { buffer in
            EVP_EncryptFinal_ex(context.pointer, buffer.baseAddress! + total, &length)
        }
        try context.check(finished, "finish")
        total += Int(length)
        var tag = [UInt8](repeating: 0, count: Self.tagByteCount)
        try context.check(
            EVP_CIPHER_CTX_ctrl(context.pointer, EVP_CTRL_GCM_GET_TAG, Int32(Self.tagByteCount), &tag), "get tag")
        return [Self.version] + nonce + ciphertext[..<total] + tag
    }
}

/// One `EVP_CIPHER_CTX`, freed when this goes away. Used by one call, never shared.
private final class CipherContext {
    let pointer: OpaquePointer

    init() throws {
        guard let pointer = EVP_CIPHER_CTX_new() else {
            throw CryptoError.fromOpenSSL(.openSSLFailure, "EVP_CIPHER_CTX_new failed")
        }
        self.pointer = pointer
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }

    func check(_ status: Int32, _ step: String) throws {
        guard status == 1 else { throw CryptoError.fromOpenSSL(.openSSLFailure, "AES-256-GCM \(step) failed") }
    }
}
