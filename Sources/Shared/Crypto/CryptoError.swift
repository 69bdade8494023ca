import COpenSSL

/// A cryptographic operation that failed: bad input (a malformed key, a point off
/// the curve, a sealed blob that does not authenticate) or a failure inside OpenSSL.
///
/// `description` names the operation and, for OpenSSL failures, OpenSSL's own
/// reason string. It never includes key material, plaintext, tokens or the input
/// that was rejected.
public struct CryptoError: Error, Equatable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        private init(_ name: String) { self.name = name }

        /// A symmetric key that is not exactly the required length.
        public static let invalidKeyLength = Code("invalidKeyLength")
        /// A PEM text that holds no readable key of the expected kind.
        public static let invalidKeyEncoding = Code("invalidKeyEncoding")
        /// A readable key that is not an EC key on P-256.
        public static let unsupportedKeyType = Code("unsupportedKeyType")
        /// An uncompressed point that is not 65 bytes long.
        public static let invalidPointLength = Code("invalidPointLength")
        /// An encoded point that does not start with 0x04 (uncompressed form).
        public static let invalidPointFormat = Code("invalidPointFormat")
        /// Coordinates that do not lie on the P-256 curve.
        public static let pointNotOnCurve = Code("pointNotOnCurve")
        /// A sealed blob too short to hold version, nonce and tag.
        public static let malformedSealedData = Code("malformedSealedData")
        /// A sealed blob whose version byte this code does not know.
        public static let unsupportedSealVersion = Code("unsupportedSealVersion")
        /// A sealed blob that does not authenticate (tampered, wrong key or wrong
        /// associated data).
        public static let authenticationFailed = Code("authenticationFailed")
        /// A token that is not three base64url parts of JSON as JWT requires.
        public static let malformedToken = Code("malformedToken")
        /// A token whose `alg` is not `ES256`.
        public static let unsupportedAlgorithm = Code("unsupportedAlgorithm")
        /// A signature that does not verify with the given public key.
        public static let invalidSignature = Code("invalidSignature")
        /// OpenSSL failed where valid input cannot fail (allocation, provider).
        public static let openSSLFailure = Code("openSSLFailure")

        public var description: String { name }
    }

    public let code: Code
    /// What went wrong, in words; never echoes secrets or rejected input.
    public let message: String
    /// OpenSSL's reason for the failure (e.g. `error:…:DECODER routines::unsupported`),
    /// when OpenSSL reported one.
    public let openSSLReason: String?

    public init(_ code: Code, _ message: String, openSSLReason: String? = nil) {
        self.code = code
        self.message = message
        self.openSSLReason = openSSLReason
    }

    public var description: String {
        var text = "crypto error (\(code)): \(message)"
        if let openSSLReason { text += " [\(openSSLReason)]" }
        return text
    }

    /// An error carrying OpenSSL's first queued reason. Empties the calling thread's
    /// OpenSSL error queue, so a stale entry cannot confuse a later, unrelated call
    /// on this thread (TLS code reads the same queue).
    static func fromOpenSSL(_ code: Code, _ message: String) -> CryptoError {
        CryptoError(code, message, openSSLReason: OpenSSLErrorQueue.drain())
    }
}

/// The calling thread's OpenSSL error queue.
enum OpenSSLErrorQueue {
    /// Whether the calling thread's queue holds no error.
    static var isEmpty: Bool { ERR_peek_error() == 0 }

    /// Empties the queue and returns the oldest entry as text, if there was one.
    @discardableResult
    static func drain() -> String? {
        let first = ERR_get_error()
        guard first != 0 else { return nil }
        ERR_clear_error()
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(first, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
