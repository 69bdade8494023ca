import Foundation

/// JSON Web Tokens signed with ES256 (ECDSA P-256 / SHA-256, RFC 7515 and
/// RFC 7518 §3.4), as APNs provider tokens use them:
/// header `{"alg":"ES256","kid":<key id>}`, claims `{"iss":<team id>,"iat":<seconds>}`.
///
/// `sign` makes a token. `init(parsing:)` decodes one *without* trusting it, so a
/// verifier can read `kid` and `iss` to find the key; `verify(with:)` then checks
/// the algorithm and signature. `verify(_:key:)` does both in one step.
public struct ES256JWT: Sendable, Equatable {
    public struct Header: Sendable, Equatable, Decodable {
        /// `alg`; a verified token always has `ES256`.
        public var algorithm: String
        /// `kid`: for APNs, the 10-character key id of the `.p8`.
        public var keyID: String?

        public init(algorithm: String, keyID: String?) {
            self.algorithm = algorithm
            self.keyID = keyID
        }

        enum CodingKeys: String, CodingKey {
            case algorithm = "alg"
            case keyID = "kid"
        }
    }

    public struct Claims: Sendable, Equatable, Decodable {
        /// `iss`: for APNs, the team id.
        public var issuer: String?
        /// `iat`: when the token was made, in whole seconds since 1970.
        public var issuedAt: Int64?

        public init(issuer: String?, issuedAt: Int64?) {
            self.issuer = issuer
            self.issuedAt = issuedAt
        }

        enum CodingKeys: String, CodingKey {
            case issuer = "iss"
            case issuedAt = "iat"
        }
    }

    public let header: Header
    public let claims: Claims
    /// The signed text: `<header>.<claims>` as they appeared in the token.
    public let signingInput: String
    /// The signature part, decoded (64 bytes R || S for a well-formed ES256 token).
    public let signature: [UInt8]

    /// A compact ES256 token, `<header>.<claims>.<signature>` in base64url, with
    /// `kid` = `keyID`, `iss` = `teamID` and `iat` = `issuedAt` in whole seconds.
    public static func sign(keyID: String, teamID: String, issuedAt: Date, key: P256PrivateKey) throws -> String {
        let seconds = Int64(issuedAt.timeIntervalSince1970.rounded(.down))
        let header = #"{"alg":"ES256","kid":\#(JSONString.quote(keyID))}"#
        let claims = #"{"iss":\#(JSONString.quote(teamID)),"iat":\#(seconds)}"#
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
        let signature = try key.signature(for: Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// Decodes a compact token without checking its signature. Throws
    /// `malformedToken` unless it is three base64url parts whose first two are JSON
    /// objects with the types above (`alg` a string, `iat` an integer, …).
    public init(parsing token: String) throws {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else {
            throw CryptoError(.malformedToken, "a JWT has three dot-separated parts, this has \(parts.count)")
        }
        guard let headerJSON = Base64URL.decode(parts[0]), let claimsJSON = Base64URL.decode(parts[1]),
            let signature = Base64URL.decode(parts[2])
        else {
            throw CryptoError(.malformedToken, "a JWT part is not unpadded base64url")
        }
        let decoder = JSONDecoder()
        do {
            header = try decoder.decode(Header.self, from: Data(headerJSON))
            claims = try decoder.decode(Claims.self, from: Data(claimsJSON))
        } catch {
            throw CryptoError(.malformedToken, "the JWT header or claims are not the expected JSON")
        }
        self.signingInput = parts[0] + "." + parts[1]
        self.signature = signature
    }

    /// Throws `unsupportedAlgorithm` unless `alg` is `ES256` (so `none` and
    /// HMAC tokens are refused), and `invalidSignature` unless the signature is
    /// 64 bytes R || S and verifies over `signingInput` with `key`.
    public func verify(with key: P256PublicKey) throws {
        guard header.algorithm == "ES256" else {
            throw CryptoError(.unsupportedAlgorithm, "the JWT algorithm is not ES256")
        }
        guard signature.count == 64, key.isValidSignature(signature, for: Array(signingInput.utf8)) else {
            throw CryptoError(.invalidSignature, "the JWT signature does not verify with this key")
        }
    }

    /// Decodes `token` and verifies it with `key`; see `init(parsing:)` and `verify(with:)`.
    public static func verify(_ token: String, key: P256PublicKey) throws -> ES256JWT {
        let jwt = try ES256JWT(parsing: token)
        try jwt.verify(with: key)
        return jwt
    }
}
