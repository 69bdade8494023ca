/// Seals and opens `.p8` keys for `push_credentials.sealed_key`: AES-256-GCM under
/// `CREDENTIAL_KEY`, with the credential's id as associated data, so a sealed key
/// copied onto another credential's row does not open.
///
/// What is sealed is the key's canonical PKCS#8 PEM (as re-exported after parsing),
/// never stored or logged anywhere in the clear.
public struct PushCredentialSealer: Sendable, CustomStringConvertible {
    private let sealer: AESGCMSealer

    public init(key: [UInt8]) throws {
        sealer = try AESGCMSealer(key: key)
    }

    public init(configuration: CommonConfiguration) throws {
        try self.init(key: configuration.credentialKey)
    }

    public func seal(_ privateKey: P256PrivateKey, credentialID: String) throws -> [UInt8] {
        try sealer.seal(Array(privateKey.pemRepresentation.utf8), associatedData: Array(credentialID.utf8))
    }

    public func open(_ sealed: [UInt8], credentialID: String) throws -> P256PrivateKey {
        var pem = try sealer.open(sealed, associatedData: Array(credentialID.utf8))
        defer { for index in pem.indices { pem[index] = 0 } }
        return try P256PrivateKey(pemRepresentation: String(decoding: pem, as: UTF8.self))
    }

    public var description: String { "PushCredentialSealer(key: <redacted>)" }
}
