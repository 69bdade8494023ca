/// Field names of the cache hashes the hot-path script reads (`RedisKeys.subscription`,
/// `.app`, `.account`). Filled from Postgres on a miss by the ingress; dropped by
/// `CacheInvalidation` when the rows change.
public enum SubscriptionCacheField {
    public static let app = "app"
    /// `pending` or `active`.
    public static let state = "state"
    /// `1` for the APNs sandbox, `0` for production.
    public static let sandbox = "sandbox"
    /// The queue entry's subscription part (`QueueMessage.subscriptionPart`: app,
    /// topic, token, sandbox, alert title and body, packed), passed through as is.
    /// An entry without it (an older layout) is filled again.
    public static let part = "part"
    /// `<state>:<sandbox>:<app id>` (`contextValue`): what the hot-path script reads of
    /// `app`, `state` and `sandbox`, as one value it makes into a record once per run.
    /// Those three stay for ingresses before it (a rolling upgrade). An entry without
    /// it (an older layout) is filled again.
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
    /// The fields ingresses before queue format 2 read instead of `part`. A fill
    /// writes them too while both may run side by side (a rolling upgrade): an older
    /// ingress that found a live entry without them would enqueue a push with no
    /// device token. Remove them once no format-1 ingress can be running.
    public static let formatOneTopic = "topic"
    public static let formatOneToken = "token"
    public static let formatOneTitle = "title"
    public static let formatOneBody = "body"
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
