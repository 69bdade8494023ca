/// App API keys: random bearer secrets of the form `pgk_<43 base64url characters>`
/// (32 random bytes). Only `hash(of:)` is stored; the key itself is shown once.
public enum AppAPIKey {
    public static let prefix = "pgk_"

    /// A new key; show it once, store `hash(of:)`.
    public static func generate() -> String {
        prefix + Base64URL.encode(SecureRandom.bytes(32))
    }

    /// The SHA-256 of the key's UTF-8 text, as stored in `app_api_keys.key_hash`.
    public static func hash(of key: String) -> [UInt8] {
        SHA256.hash(key)
    }

    /// Whether `text` has the shape of a key (not whether one exists).
    public static func isWellFormed(_ text: String) -> Bool {
        guard text.hasPrefix(prefix) else { return false }
        let body = text.dropFirst(prefix.count)
        return body.utf8.count == 43 && Base64URL.decode(body)?.count == 32
    }
}
