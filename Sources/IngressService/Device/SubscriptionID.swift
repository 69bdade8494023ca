/// Subscription ids: 16 random bytes, base64url (22 characters).
enum SubscriptionID {
    static let length = 22

    /// Whether `id` could be one of ours (checked before any lookup).
    static func isWellFormed(_ id: String) -> Bool {
        id.utf8.count == length && id.utf8.allSatisfy(WebPushHeaders.isBase64URLCharacter)
    }
}
