/// Field names of the cache hashes the hot-path script reads (`RedisKeys.subscription`,
/// `.app`, `.account`). Filled from Postgres on a miss by the ingress; dropped by
/// `CacheInvalidation` when the rows change.
///
/// An entry holds only what the script reads: every field costs each cached
/// subscription memory for as long as its entry lives (fresh, then stale).
public enum SubscriptionCacheField {
    /// The queue entry's subscription part (`QueueMessage.subscriptionPart`: app,
    /// topic, token, sandbox, alert title and body, packed), passed through as is.
    /// An entry without it (an older layout) is filled again.
    public static let part = "part"
    /// `<state>:<sandbox>:<app id>` (`contextValue`; state `active` or `pending`,
    /// sandbox `1` for the APNs sandbox): one value the hot-path script makes into a
    /// record once per run. An entry without it (an older layout) is filled again.
    public static let context = "ctx"

    public static func contextValue(active: Bool, sandbox: Bool, appID: String) -> String {
        (active ? "active:" : "pending:") + (sandbox ? "1:" : "0:") + appID
    }

    /// Until when (Redis server time, UNIX ms) the entry is fresh: written by the
    /// fill (`HotPathCache`), which lets the entry live on past it for a while. Past it
    /// the hot-path script reads it again from Postgres, and uses it stale only when
    /// Postgres cannot be read. The same field in app and account entries.
    public static let fresh = "fresh"
    /// `1` in a negative entry: no such subscription in Postgres (short-lived).
    public static let missing = "missing"
    /// Written by the hot-path script, not the fill: until when (UNIX ms) the
    /// subscription's rate window list lives at least (`HotPathScript`).
    public static let rateWindowExpiry = "rexp"
}

public enum AppCacheField {
    public static let account = "acct"
    /// `1` when the app has push enabled.
    public static let enabled = "enabled"
    /// The chosen credential's id, empty when none is chosen.
    public static let credential = "cred"
    /// The credential's status (`active`, `rejected`), empty when none is chosen.
    public static let credentialStatus = "cstatus"
    /// See `SubscriptionCacheField.fresh`.
    public static let fresh = SubscriptionCacheField.fresh
}

public enum AccountCacheField {
    /// The monthly push limit: `-1` unlimited, `0` push not available (Lite).
    public static let monthlyLimit = "limit"
    /// See `SubscriptionCacheField.fresh`.
    public static let fresh = SubscriptionCacheField.fresh
}
