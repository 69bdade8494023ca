import TestSupport
import Testing

@testable import Shared

@Suite struct AESGCMTests {
    static let zeroKey = [UInt8](repeating: 0, count: 32)
    static let countingKey = [UInt8](0..<32)

    @Test func sealMatchesGCMSpecTestCase14CiphertextAndIndependentTag() throws {
        // McGrew & Viega, GCM spec, test case 14: AES-256, zero key, zero IV, 16 zero
        // bytes → ciphertext cea7403d…9d18 (tag d0d1c8a7… without associated data).
        // Our AAD is the version byte 0x01; that tag was computed with Python
        // `cryptography` (AESGCM(key).encrypt(iv, pt, b"\x01")).
        let sealer = try AESGCMSealer(key: Self.zeroKey)
        let sealed = try sealer.seal(
            [UInt8](repeating: 0, count: 16), nonce: [UInt8](repeating: 0, count: 12), associatedData: [])
        #expect(
            hexString(sealed)
                == "01" + "000000000000000000000000" + "cea7403d4d606b6e074ec5d3baf39d18"
                + "4dfc3b29cb522037ef8b5c806231e4e2")
    }

    @Test func sealMatchesPythonCryptographyWithAssociatedData() throws {
        // Python: AESGCM(bytes(range(32))).encrypt(bytes(range(12)), b"secret .p8 text", b"\x01credential-42")
        let sealer = try AESGCMSealer(key: Self.countingKey)
        let sealed = try sealer.seal(
            Array("secret .p8 text".utf8), nonce: [UInt8](0..<12), associatedData: Array("credential-42".utf8))
        #expect(
            hexString(sealed)
                == "01" + "000102030405060708090a0b" + "3467b569a091e235fd79b7ffd4910c"
                + "c8d0f2e3fc254bba2e24f1bc6fe1b137")
        #expect(try sealer.open(sealed, associatedData: Array("credential-42".utf8)) == Array("secret .p8 text".utf8))
    }

    @Test func sealProducesVersionNonceCiphertextTagLayoutWithFreshNonce() throws {
        let sealer = try AESGCMSealer(key: Self.countingKey)
        let plaintext = Array("-----BEGIN PRIVATE KEY-----".utf8)
        let first = try sealer.seal(plaintext, associatedData: [])
        let second = try sealer.seal(plaintext, associatedData: [])
        #expect(first.count == 1 + 12 + plaintext.count + 16)
        #expect(first[0] == 0x01)
        #expect(first[1..<13] != second[1..<13])
        #expect(first[13...] != second[13...])
        #expect(try sealer.open(first, associatedData: []) == plaintext)
        #expect(try sealer.open(second, associatedData: []) == plaintext)
    }

    @Test func emptyPlaintextSealsAndOpens() throws {
        let sealer = try AESGCMSealer(key: Self.countingKey)
        let sealed = try sealer.seal([], associatedData: [7])
        #expect(sealed.count == AESGCMSealer.overhead)
        #expect(try sealer.open(sealed, associatedData: [7]) == [])
    }

    @Test func everyFlippedNonceBitFailsToOpen() throws {
        try expectEveryFlippedBitFails(in: 1..<13)
    }

    @Test func everyFlippedCiphertextBitFailsToOpen() throws {
        try expectEveryFlippedBitFails(in: 13..<(13 + 20))
    }

    @Test func everyFlippedTagBitFailsToOpen() throws {
        try expectEveryFlippedBitFails(in: (13 + 20)..<(13 + 20 + 16))
    }

    private func expectEveryFlippedBitFails(in region: Range<Int>) throws {
        let sealer = try AESGCMSealer(key: Self.countingKey)
        let associatedData = Array("credential-7".utf8)
        let sealed = try sealer.seal(Array("twenty bytes of key!".utf8), associatedData: associatedData)
        #expect(sealed.count == 13 + 20 + 16)
        for index in region {
            for bit in 0..<8 {
                var tampered = sealed
                tampered[index] ^= 1 << UInt8(bit)
                #expect(
                    errorCode { try sealer.open(tampered, associatedData: associatedData) } == .authenticationFailed)
            }
        }
    }

    @Test func changedVersionByteIsRejectedAsUnsupported() throws {
        let sealer = try AESGCMSealer(key: Self.countingKey)
        var sealed = try sealer.seal([1, 2, 3], associatedData: [])
        sealed[0] = 0x02
        #expect(errorCode { try sealer.open(sealed, associatedData: []) } == .unsupportedSealVersion)
    }

    @Test func otherAssociatedDataFailsToOpen() throws {
        let sealer = try AESGCMSealer(key: Self.countingKey)
        let sealed = try sealer.seal([1, 2, 3], associatedData: Array("credential-1".utf8))
        #expect(
            errorCode { try sealer.open(sealed, associatedData: Array("credential-2".utf8)) } == .authenticationFailed)
        #expect(errorCode { try sealer.open(sealed, associatedData: []) } == .authenticationFailed)
    }

    @Test func otherKeyFailsToOpen() throws {
        let sealed = try AESGCMSealer(key: Self.countingKey).seal([1, 2, 3], associatedData: [])
        let other = try AESGCMSealer(key: Self.zeroKey)
        #expect(errorCode { try other.open(sealed, associatedData: []) } == .authenticationFailed)
    }

    @Test(arguments: [0, 1, 28])
    func blobShorterThanVersionNonceAndTagIsMalformed(length: Int) throws {
        let sealer = try AESGCMSealer(key: Self.countingKey)
        let blob = [UInt8](repeating: 1, count: length)
        #expect(errorCode { try sealer.open(blob, associatedData: []) } == .malformedSealedData)
    }

    @Test(arguments: [0, 16, 31, 33, 64])
    func keyOtherThan32BytesIsRejected(length: Int) {
        #expect(errorCode { try AESGCMSealer(key: [UInt8](repeating: 9, count: length)) } == .invalidKeyLength)
    }

    @Test func sealerFromConfigurationUsesCredentialKeyAndHidesIt() throws {
        let environment = Environment([
            "DATABASE_URL": "postgresql://pushgate@127.0.0.1:55432/pushgate",
            "REDIS_URL": "redis://127.0.0.1:56379/0",
            "CREDENTIAL_KEY": "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        ])
        let sealer = try AESGCMSealer(configuration: CommonConfiguration(environment: environment))
        let sealed = try AESGCMSealer(key: Self.countingKey).seal([42], associatedData: [])
        #expect(try sealer.open(sealed, associatedData: []) == [42])
        #expect(sealer.description == "AESGCMSealer(version: 1, key: <redacted>)")
        #expect(String(reflecting: sealer).contains("<redacted>"))
    }
}
