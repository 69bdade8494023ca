import Foundation
import TestSupport
import Testing

@testable import Shared

@Suite struct ES256Tests {
    /// An Apple-style `.p8` (PKCS#8, made with `openssl genpkey -algorithm EC
    /// -pkeyopt ec_paramgen_curve:P-256`) and its public point as OpenSSL prints it.
    static let p8 = """
        -----BEGIN PRIVATE KEY-----
        MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgRiDPHCFWxgT0JjbQ
        zAl5LB90DAc9JWLJyvx30wZ0Iw+hRANCAARE87EGjbmzqqoyBixGu4yktHDqiLcs
        3KuC0kw060J/pN2UaqR/hnmM9qdgzPIaOniqj33+X4DUUwnfRCNSMeT4
        -----END PRIVATE KEY-----
        """
    static let p8PublicPEM = """
        -----BEGIN PUBLIC KEY-----
        MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAERPOxBo25s6qqMgYsRruMpLRw6oi3
        LNyrgtJMNOtCf6TdlGqkf4Z5jPanYMzyGjp4qo99/l+A1FMJ30QjUjHk+A==
        -----END PUBLIC KEY-----

        """
    static let p8PublicPointHex =
        "0444f3b1068db9b3aaaa32062c46bb8ca4b470ea88b72cdcab82d24c34eb427fa4"
        + "dd946aa47f86798cf6a760ccf21a3a78aa8f7dfe5f80d45309df44235231e4f8"
    /// The same private scalar as PKCS#8 without the optional public key
    /// (`openssl ec -no_public | openssl pkcs8 -topk8 -nocrypt`).
    static let p8WithoutPublicKey = """
        -----BEGIN PRIVATE KEY-----
        MEECAQAwEwYHKoZIzj0CAQYIKoZIzj0DAQcEJzAlAgEBBCBGIM8cIVbGBPQmNtDM
        CXksH3QMBz0lYsnK/HfTBnQjDw==
        -----END PRIVATE KEY-----
        """
    /// The same key with a compressed public point
    /// (`openssl ec -conv_form compressed | openssl pkcs8 -topk8 -nocrypt`).
    static let p8WithCompressedPublicKey = """
        -----BEGIN PRIVATE KEY-----
        MGcCAQAwEwYHKoZIzj0CAQYIKoZIzj0DAQcETTBLAgEBBCBGIM8cIVbGBPQmNtDM
        CXksH3QMBz0lYsnK/HfTBnQjD6EkAyIAAkTzsQaNubOqqjIGLEa7jKS0cOqItyzc
        q4LSTDTrQn+k
        -----END PRIVATE KEY-----
        """
    static let ed25519Key = """
        -----BEGIN PRIVATE KEY-----
        MC4CAQAwBQYDK2VwBCIEIIytqe0AMBaSaCCRA5gq8afDIZ2Bf42soeyQ7hfuJUdz
        -----END PRIVATE KEY-----
        """
    static let p384Key = """
        -----BEGIN PRIVATE KEY-----
        MIG2AgEAMBAGByqGSM49AgEGBSuBBAAiBIGeMIGbAgEBBDBcl6LXfEPGaO46RU6m
        JFLEVAZarra/2XQEOWwX+nNrmCxkVHGEdvwVLlxBtOay2CqhZANiAASp+h48V4EX
        TNnBxTaiD7M+607Uye1Z6OFVmkw6ziOpyfXnGUHWFomxCMGjmwm25D5UPEjijLNy
        uudYJ8sLOkJi2dHPTyvIkgiQp7PwhLIS89e2dm5n3f5ykV+uQAWZ1Jo=
        -----END PRIVATE KEY-----
        """

    // MARK: Keys

    @Test func appleStyleP8LoadsWithTheExpectedPublicKey() throws {
        let key = try P256PrivateKey(pemRepresentation: Self.p8)
        #expect(hexString(key.publicKey.uncompressedPoint) == Self.p8PublicPointHex)
        #expect(try key.publicKey.pemRepresentation == Self.p8PublicPEM)
    }

    @Test func p8WithoutOptionalPublicKeyDerivesTheSamePublicKey() throws {
        let key = try P256PrivateKey(pemRepresentation: Self.p8WithoutPublicKey)
        #expect(hexString(key.publicKey.uncompressedPoint) == Self.p8PublicPointHex)
    }

    @Test func p8WithCompressedPublicKeyStillYieldsTheUncompressedPoint() throws {
        let key = try P256PrivateKey(pemRepresentation: Self.p8WithCompressedPublicKey)
        #expect(hexString(key.publicKey.uncompressedPoint) == Self.p8PublicPointHex)
        let signature = try key.signature(for: [1, 2, 3])
        #expect(try P256PublicKey(pemRepresentation: Self.p8PublicPEM).isValidSignature(signature, for: [1, 2, 3]))
    }

    @Test func exportedPKCS8RoundTripsAndKeepsTheKey() throws {
        let key = try P256PrivateKey(pemRepresentation: Self.p8)
        let pem = try key.pemRepresentation
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        #expect(pem.hasSuffix("-----END PRIVATE KEY-----\n"))
        let reloaded = try P256PrivateKey(pemRepresentation: pem)
        #expect(reloaded.publicKey == key.publicKey)
        let signature = try reloaded.signature(for: Array("hello".utf8))
        #expect(key.publicKey.isValidSignature(signature, for: Array("hello".utf8)))
    }

    @Test func generatedKeysAreDistinctAndExportPKCS8AndSPKI() throws {
        let first = try P256PrivateKey.generate()
        let second = try P256PrivateKey.generate()
        #expect(first.publicKey != second.publicKey)
        #expect(first.publicKey.uncompressedPoint.count == 65)
        #expect(first.publicKey.uncompressedPoint[0] == 0x04)
        #expect(try first.pemRepresentation.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        let publicPEM = try first.publicKey.pemRepresentation
        #expect(publicPEM.hasPrefix("-----BEGIN PUBLIC KEY-----\n"))
        #expect(try P256PublicKey(pemRepresentation: publicPEM) == first.publicKey)
        #expect(try P256PrivateKey(pemRepresentation: first.pemRepresentation).publicKey == first.publicKey)
    }

    @Test func opensslCLIReadsGeneratedPKCS8AndDerivesTheSameSPKI() async throws {
        let key = try P256PrivateKey.generate()
        let directory = try TemporaryDirectory()
        let privatePath = try directory.write("private.pem", key.pemRepresentation)
        let result = try await ChildProcess.run("/usr/bin/openssl", ["pkey", "-in", privatePath, "-pubout"])
        #expect(result.status == 0, "openssl: \(result.standardError)")
        #expect(try result.standardOutput == key.publicKey.pemRepresentation)
    }

    @Test func publicKeyFromSPKIPEMEqualsPublicKeyFromPoint() throws {
        let fromPEM = try P256PublicKey(pemRepresentation: Self.p8PublicPEM)
        let fromPoint = try P256PublicKey(uncompressedPoint: hexBytes(Self.p8PublicPointHex))
        #expect(fromPEM == fromPoint)
        #expect(fromPEM.uncompressedPoint == hexBytes(Self.p8PublicPointHex))
        #expect(try fromPoint.pemRepresentation == Self.p8PublicPEM)
    }

    @Test func keysOtherThanP256AreRejectedAsUnsupported() {
        #expect(errorCode { try P256PrivateKey(pemRepresentation: Self.ed25519Key) } == .unsupportedKeyType)
        #expect(errorCode { try P256PrivateKey(pemRepresentation: Self.p384Key) } == .unsupportedKeyType)
    }

    @Test func textWithoutAPrivateKeyIsRejectedAsInvalidEncoding() {
        #expect(errorCode { try P256PrivateKey(pemRepresentation: "") } == .invalidKeyEncoding)
        #expect(errorCode { try P256PrivateKey(pemRepresentation: "not a key") } == .invalidKeyEncoding)
        #expect(errorCode { try P256PrivateKey(pemRepresentation: Self.p8PublicPEM) } == .invalidKeyEncoding)
        let truncated = String(Self.p8.prefix(80)) + "\n-----END PRIVATE KEY-----\n"
        #expect(errorCode { try P256PrivateKey(pemRepresentation: truncated) } == .invalidKeyEncoding)
        #expect(errorCode { try P256PublicKey(pemRepresentation: Self.p8) } == .invalidKeyEncoding)
    }

    @Test func encryptedPKCS8IsRejectedWithoutPromptingForAPassword() async throws {
        let directory = try TemporaryDirectory()
        let plainPath = try directory.write("plain.pem", Self.p8)
        let result = try await ChildProcess.run(
            "/usr/bin/openssl", ["pkcs8", "-topk8", "-in", plainPath, "-passout", "pass:secret", "-v2", "aes-256-cbc"])
        #expect(result.status == 0, "openssl: \(result.standardError)")
        #expect(result.standardOutput.hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        #expect(errorCode { try P256PrivateKey(pemRepresentation: result.standardOutput) } == .invalidKeyEncoding)
    }

    @Test func errorAndKeyDescriptionsNeverShowKeyMaterial() throws {
        let key = try P256PrivateKey(pemRepresentation: Self.p8)
        #expect(key.description == "P256PrivateKey(public: \(Base64URL.encode(hexBytes(Self.p8PublicPointHex))))")
        let secretLine = "zAl5LB90DAc9JWLJyvx30wZ0Iw"
        let garbled = Self.p8.replacingOccurrences(of: "MIGHAgEAMBMG", with: "MIGHAgEAMBMX")
        do {
            _ = try P256PrivateKey(pemRepresentation: garbled)
            Issue.record("a garbled key loaded")
        } catch let error as CryptoError {
            #expect(error.code == .invalidKeyEncoding)
            #expect(!error.description.contains(secretLine))
            #expect(
                error.description.hasPrefix(
                    "crypto error (invalidKeyEncoding): the text holds no unencrypted PEM private key"))
        }
    }

    // MARK: Uncompressed points (Web Push p256dh)

    @Test(arguments: [0, 1, 33, 64, 66, 97])
    func pointOfWrongLengthIsRejected(length: Int) {
        var point = [UInt8](repeating: 0x11, count: length)
        if length > 0 { point[0] = 0x04 }
        #expect(errorCode { try P256PublicKey(uncompressedPoint: point) } == .invalidPointLength)
    }

    @Test(arguments: [0x00, 0x02, 0x03, 0x05, 0x06, 0x07] as [UInt8])
    func pointNotStartingWith04IsRejected(prefix: UInt8) {
        var point = hexBytes(Self.p8PublicPointHex)
        point[0] = prefix
        #expect(errorCode { try P256PublicKey(uncompressedPoint: point) } == .invalidPointFormat)
    }

    @Test func pointOffTheCurveIsRejected() {
        var point = hexBytes(Self.p8PublicPointHex)
        point[64] ^= 0x01
        #expect(errorCode { try P256PublicKey(uncompressedPoint: point) } == .pointNotOnCurve)
        let zeros = [0x04] + [UInt8](repeating: 0, count: 64)
        #expect(errorCode { try P256PublicKey(uncompressedPoint: zeros) } == .pointNotOnCurve)
        // X = p (the field prime) is out of range even though Y could be anything.
        let fieldPrime = hexBytes("ffffffff00000001000000000000000000000000ffffffffffffffffffffffff")
        #expect(
            errorCode { try P256PublicKey(uncompressedPoint: [0x04] + fieldPrime + fieldPrime) } == .pointNotOnCurve)
    }

    @Test func pointOnTheCurveIsAccepted() throws {
        let key = try P256PublicKey(uncompressedPoint: hexBytes(Self.p8PublicPointHex))
        #expect(key.uncompressedPoint == hexBytes(Self.p8PublicPointHex))
        let generated = try P256PrivateKey.generate().publicKey
        #expect(try P256PublicKey(uncompressedPoint: generated.uncompressedPoint) == generated)
    }

    // MARK: Signatures

    @Test func signatureIsRaw64BytesAndVerifiesOnlyForItsMessageAndKey() throws {
        let key = try P256PrivateKey(pemRepresentation: Self.p8)
        let message = Array("message".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.count == 64)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(!key.publicKey.isValidSignature(signature, for: Array("messagf".utf8)))
        #expect(try !P256PrivateKey.generate().publicKey.isValidSignature(signature, for: message))
        #expect(try key.signature(for: message) != signature)
        var flipped = signature
        flipped[40] ^= 0x04
        #expect(!key.publicKey.isValidSignature(flipped, for: message))
        #expect(!key.publicKey.isValidSignature(Array(signature.prefix(63)), for: message))
        #expect(!key.publicKey.isValidSignature([UInt8](repeating: 0, count: 64), for: message))
    }

    @Test func oneKeySignsFromManyTasksAtOnce() async throws {
        let key = try P256PrivateKey.generate()
        let message = Array("concurrent".utf8)
        let signatures = try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<32 { group.addTask { try key.signature(for: message) } }
            return try await group.reduce(into: [[UInt8]]()) { $0.append($1) }
        }
        #expect(signatures.count == 32)
        #expect(signatures.allSatisfy { key.publicKey.isValidSignature($0, for: message) })
    }

    // MARK: JWT

    @Test func signedTokenHasExactHeaderClaimsAndVerifies() throws {
        let key = try P256PrivateKey(pemRepresentation: Self.p8)
        let token = try ES256JWT.sign(
            keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: Date(timeIntervalSince1970: 1_700_000_000.9), key: key)
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(parts[0] == "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyM0RFRkcifQ")  // {"alg":"ES256","kid":"ABC123DEFG"}
        #expect(Base64URL.decode(parts[0]) == Array(#"{"alg":"ES256","kid":"ABC123DEFG"}"#.utf8))
        #expect(Base64URL.decode(parts[1]) == Array(#"{"iss":"DEF123GHIJ","iat":1700000000}"#.utf8))
        #expect(Base64URL.decode(parts[2])?.count == 64)

        let verified = try ES256JWT.verify(token, key: key.publicKey)
        #expect(verified.header == ES256JWT.Header(algorithm: "ES256", keyID: "ABC123DEFG"))
        #expect(verified.claims == ES256JWT.Claims(issuer: "DEF123GHIJ", issuedAt: 1_700_000_000))
    }

    @Test func jsonSpecialCharactersInIDsAreEscaped() throws {
        let key = try P256PrivateKey.generate()
        let token = try ES256JWT.sign(
            keyID: "a\"b\\c\n", teamID: "t\u{01}", issuedAt: Date(timeIntervalSince1970: 5), key: key)
        let verified = try ES256JWT.verify(token, key: key.publicKey)
        #expect(verified.header.keyID == "a\"b\\c\n")
        #expect(verified.claims.issuer == "t\u{01}")
        let claims = try #require(Base64URL.decode(token.split(separator: ".")[1]))
        #expect(claims == Array(#"{"iss":"t\u0001","iat":5}"#.utf8))
    }

    @Test func parsingReadsKeyIDAndIssuerBeforeVerification() throws {
        let key = try P256PrivateKey.generate()
        let token = try ES256JWT.sign(
            keyID: "KEY0000001", teamID: "TEAM000001", issuedAt: Date(timeIntervalSince1970: 42), key: key)
        let parsed = try ES256JWT(parsing: token)
        #expect(parsed.header.keyID == "KEY0000001")
        #expect(parsed.claims.issuer == "TEAM000001")
        #expect(parsed.claims.issuedAt == 42)
        #expect(parsed.signingInput == token.split(separator: ".").prefix(2).joined(separator: "."))
        try parsed.verify(with: key.publicKey)
        #expect(errorCode { try parsed.verify(with: P256PrivateKey.generate().publicKey) } == .invalidSignature)
    }

    @Test func tokenWithTamperedClaimOrSignatureIsRejected() throws {
        let key = try P256PrivateKey(pemRepresentation: Self.p8)
        let token = try ES256JWT.sign(
            keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: Date(timeIntervalSince1970: 1), key: key)
        let parts = token.split(separator: ".").map(String.init)
        let forgedClaims = Base64URL.encode(Array(#"{"iss":"EVIL000000","iat":1}"#.utf8))
        #expect(
            errorCode {
                try ES256JWT.verify([parts[0], forgedClaims, parts[2]].joined(separator: "."), key: key.publicKey)
            } == .invalidSignature)
        var signature = try #require(Base64URL.decode(parts[2]))
        signature[0] ^= 0x80
        let forgedSignature = Base64URL.encode(signature)
        #expect(
            errorCode {
                try ES256JWT.verify([parts[0], parts[1], forgedSignature].joined(separator: "."), key: key.publicKey)
            } == .invalidSignature)
        #expect(
            errorCode { try ES256JWT.verify([parts[0], parts[1], ""].joined(separator: "."), key: key.publicKey) }
                == .invalidSignature)
    }

    @Test(arguments: [#"{"alg":"none","kid":"ABC123DEFG"}"#, #"{"alg":"HS256"}"#, #"{"alg":"es256"}"#])
    func tokenWithAnotherAlgorithmIsRejected(header: String) throws {
        let key = try P256PrivateKey(pemRepresentation: Self.p8)
        let signingInput =
            Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(#"{"iss":"X","iat":1}"#.utf8))
        // Even with a signature that is valid over these bytes, the algorithm decides.
        let signature = try key.signature(for: Array(signingInput.utf8))
        let token = signingInput + "." + Base64URL.encode(signature)
        #expect(errorCode { try ES256JWT.verify(token, key: key.publicKey) } == .unsupportedAlgorithm)
    }

    @Test(arguments: [
        "", "a", "a.b", "a.b.c.d", "eyJhbGciOiJFUzI1NiJ9.e30", "eyJhbGciOiJFUzI1NiJ9=.e30.AA",
        "bm90IGpzb24.e30.AA",  // header "not json"
        "eyJhbGciOjF9.e30.AA",  // {"alg":1}
        "eyJhbGciOiJFUzI1NiJ9.eyJpYXQiOiJub3cifQ.AA",  // {"iat":"now"}
        "eyJhbGciOiJFUzI1NiJ9.e30.+A",
    ])
    func malformedTokenIsRejected(token: String) throws {
        #expect(errorCode { try ES256JWT(parsing: token) } == .malformedToken)
    }

    @Test func everyOperationLeavesTheOpenSSLErrorQueueEmpty() throws {
        // TLS code on the same thread reads this queue; a stale entry breaks it.
        // Swift Testing runs this synchronous test on one thread from start to end.
        let key = try P256PrivateKey(pemRepresentation: Self.p8)
        #expect(OpenSSLErrorQueue.isEmpty)
        _ = try P256PrivateKey(pemRepresentation: Self.p8WithoutPublicKey)
        #expect(OpenSSLErrorQueue.isEmpty)
        _ = try P256PublicKey(pemRepresentation: Self.p8PublicPEM)
        #expect(OpenSSLErrorQueue.isEmpty)
        _ = try key.pemRepresentation
        _ = try key.publicKey.pemRepresentation
        _ = try P256PrivateKey.generate()
        #expect(OpenSSLErrorQueue.isEmpty)
        let signature = try key.signature(for: [1])
        #expect(key.publicKey.isValidSignature(signature, for: [1]))
        #expect(OpenSSLErrorQueue.isEmpty)
        #expect(!key.publicKey.isValidSignature(signature, for: [2]))
        #expect(OpenSSLErrorQueue.isEmpty)
        _ = errorCode { try P256PrivateKey(pemRepresentation: "not a key") }
        _ = errorCode { try P256PrivateKey(pemRepresentation: Self.ed25519Key) }
        _ = errorCode { try P256PublicKey(pemRepresentation: "not a key") }
        #expect(OpenSSLErrorQueue.isEmpty)
        var offCurve = hexBytes(Self.p8PublicPointHex)
        offCurve[64] ^= 1
        _ = errorCode { try P256PublicKey(uncompressedPoint: offCurve) }
        #expect(OpenSSLErrorQueue.isEmpty)
        let sealer = try AESGCMSealer(key: [UInt8](repeating: 3, count: 32))
        var sealed = try sealer.seal([1, 2, 3], associatedData: [])
        sealed[20] ^= 1
        _ = errorCode { try sealer.open(sealed, associatedData: []) }
        #expect(OpenSSLErrorQueue.isEmpty)
    }

    /// The curve check reuses its decoding scratch: a point that failed to decode
    /// leaves nothing behind for the next check on any thread.
    @Test func curveMembershipStaysRightWhileChecksRunAtOnceAndReuseTheirScratch() async throws {
        let valid = hexBytes(Self.p8PublicPointHex)
        let offCurve = valid.dropLast() + [valid[64] ^ 1]
        let points = try (0..<8).map { _ in try P256PrivateKey.generate().publicKey.uncompressedPoint }
        let wrong = try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var wrong = 0
                    for round in 0..<500 {
                        if P256Curve.shared.contains(uncompressedPoint: offCurve[...]) { wrong += 1 }
                        let point = (round + worker) % 2 == 0 ? valid : points[worker]
                        if !P256Curve.shared.contains(uncompressedPoint: point[...]) { wrong += 1 }
                        if P256Curve.shared.contains(uncompressedPoint: point.dropLast()) { wrong += 1 }
                    }
                    return wrong
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(wrong == 0)
    }

    // MARK: Independent implementations

    @Test func pythonCryptographyVerifiesOurTokenAndRejectsATamperedClaim() async throws {
        let key = try P256PrivateKey.generate()
        let token = try ES256JWT.sign(
            keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: Date(timeIntervalSince1970: 1_700_000_000), key: key)
        let parts = token.split(separator: ".").map(String.init)
        let tampered = [parts[0], Base64URL.encode(Array(#"{"iss":"DEF123GHIK","iat":1700000000}"#.utf8)), parts[2]]
            .joined(separator: ".")

        let directory = try TemporaryDirectory()
        let publicPath = try directory.write("public.pem", key.publicKey.pemRepresentation)
        let tokenPath = try directory.write("token.jwt", token)
        let tamperedPath = try directory.write("tampered.jwt", tampered)

        let valid = try await PythonScript.runCollecting(Self.pythonVerifier, [publicPath, tokenPath])
        #expect(valid.status == 0, "python: \(valid.standardError)")
        #expect(
            valid.standardOutput
                == #"valid {"alg": "ES256", "kid": "ABC123DEFG"} {"iat": 1700000000, "iss": "DEF123GHIJ"}"# + "\n")

        let rejected = try await PythonScript.runCollecting(Self.pythonVerifier, [publicPath, tamperedPath])
        #expect(rejected.status == 0, "python: \(rejected.standardError)")
        #expect(rejected.standardOutput == "invalid\n")
    }

    @Test func tokenAndPKCS8KeyMadeByPythonCryptographyVerifyHere() async throws {
        let directory = try TemporaryDirectory()
        let result = try await PythonScript.runCollecting(Self.pythonSigner, [directory.url.path])
        #expect(result.status == 0, "python: \(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        try #require(lines.count == 2)
        let privatePEM = try String(contentsOf: directory.url.appendingPathComponent("py-private.pem"), encoding: .utf8)

        let key = try P256PrivateKey(pemRepresentation: privatePEM)
        #expect(Base64URL.encode(key.publicKey.uncompressedPoint) == lines[0])
        let publicKey = try P256PublicKey(uncompressedPoint: #require(Base64URL.decode(lines[0])))
        let verified = try ES256JWT.verify(lines[1], key: publicKey)
        #expect(verified.header == ES256JWT.Header(algorithm: "ES256", keyID: "PYKEY00001"))
        #expect(verified.claims == ES256JWT.Claims(issuer: "PYTEAM0001", issuedAt: 1_234_567_890))
    }

    /// argv: public key PEM path, token path. Prints `valid <header> <claims>` or `invalid`.
    static let pythonVerifier = """
        import base64, json, sys
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
        def b64(text):
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        key = serialization.load_pem_public_key(open(sys.argv[1], "rb").read())
        assert isinstance(key, ec.EllipticCurvePublicKey) and key.curve.name == "secp256r1"
        header, claims, signature = open(sys.argv[2]).read().strip().split(".")
        raw = b64(signature)
        assert len(raw) == 64, len(raw)
        der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        try:
            key.verify(der, (header + "." + claims).encode(), ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            print("invalid")
        else:
            print("valid", json.dumps(json.loads(b64(header)), sort_keys=True), json.dumps(json.loads(b64(claims)), sort_keys=True))
        """

    /// argv: directory. Writes py-private.pem (PKCS#8); prints the public point
    /// (base64url) and an ES256 token with kid PYKEY00001, iss PYTEAM0001, iat 1234567890.
    static let pythonSigner = """
        import base64, os, sys
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
        def b64(data):
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
        key = ec.generate_private_key(ec.SECP256R1())
        with open(os.path.join(sys.argv[1], "py-private.pem"), "wb") as out:
            out.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        point = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
        signing_input = b64(b'{"alg":"ES256","kid":"PYKEY00001"}') + "." + b64(b'{"iss":"PYTEAM0001","iat":1234567890}')
        r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        print(b64(point))
        print(signing_input + "." + b64(r.to_bytes(32, "big") + s.to_bytes(32, "big")))
        """
}

// MARK: Helpers

/// A fresh directory under the system temporary directory, removed on deinit.
private final class TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("pushgate-es256-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    /// Writes `text` to `name` inside the directory and returns its path.
    func write(_ name: String, _ text: String) throws -> String {
        let file = url.appendingPathComponent(name)
        try text.write(to: file, atomically: true, encoding: .utf8)
        return file.path
    }
}

private func hexBytes(_ hex: String) -> [UInt8] {
    let digits = Array(hex.utf8)
    return stride(from: 0, to: digits.count, by: 2).map {
        UInt8(String(decoding: digits[$0..<($0 + 2)], as: UTF8.self), radix: 16)!
    }
}
