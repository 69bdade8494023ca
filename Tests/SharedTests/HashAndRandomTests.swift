import Testing

@testable import Shared

@Suite struct HashAndRandomTests {
    @Test func sha256OfABCMatchesFIPS180Vector() {
        #expect(hexString(SHA256.hash("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func sha256OfEmptyInputMatchesFIPS180Vector() {
        #expect(hexString(SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(SHA256.hash("") == SHA256.hash([]))
    }

    @Test func sha256OfTwoBlockMessageMatchesFIPS180Vector() {
        let message = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
        #expect(hexString(SHA256.hash(message)) == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func sha256OfMillionAsMatchesFIPS180Vector() {
        let message = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(hexString(SHA256.hash(message)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test(arguments: [0, 1, 12, 16, 32, 33, 1000])
    func secureRandomReturnsExactlyTheAskedLength(count: Int) {
        #expect(SecureRandom.bytes(count).count == count)
    }

    @Test func secureRandomDrawsDoNotRepeat() {
        var seen = Set<[UInt8]>()
        for _ in 0..<1000 { seen.insert(SecureRandom.bytes(16)) }
        #expect(seen.count == 1000)
        #expect(SecureRandom.bytes(32) != SecureRandom.bytes(32))
    }

    @Test func secureRandomBytesAreNotConstant() {
        // 4096 bytes that are all one value would mean a broken generator
        // (probability 2^-32760 otherwise); every value should also appear.
        let bytes = SecureRandom.bytes(4096)
        #expect(Set(bytes).count > 200)
    }

    @Test func constantTimeEqualsComparesContentAndLength() {
        let digest = SHA256.hash("secret")
        #expect(ConstantTime.equals(digest, SHA256.hash("secret")))
        #expect(ConstantTime.equals([], []))
        var firstDiffers = digest
        firstDiffers[0] ^= 0x01
        var lastDiffers = digest
        lastDiffers[31] ^= 0x80
        #expect(!ConstantTime.equals(digest, firstDiffers))
        #expect(!ConstantTime.equals(digest, lastDiffers))
        #expect(!ConstantTime.equals(digest, Array(digest.prefix(31))))
        #expect(!ConstantTime.equals(digest, digest + [0]))
        #expect(!ConstantTime.equals([], [0]))
    }
}
