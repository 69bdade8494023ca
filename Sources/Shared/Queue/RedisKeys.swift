import Foundation

/// The Redis key layout shared by the ingress and the dispatch worker.
///
/// Every key a push touches carries the queue stream's hash tag (`{0}` for
/// `pushgate:queue:{0}`), so the hot-path script's keys all live in one Redis
/// Cluster slot and the script would be legal on Cluster as well as on a single
/// primary (Sentinel). The price: one stream's pushes are served by one shard.
/// (Cluster itself is not supported yet: the clients follow no `MOVED` redirects.)
///
/// | key | type | written by | meaning |
/// |---|---|---|---|
/// | `<ns>:{t}:sub:<id>` | hash | ingress (cache fill) | subscription cache (`SubscriptionCacheField`) or `missing=1` |
/// | `<ns>:{t}:app:<id>` | hash | ingress (cache fill) | app cache (`AppCacheField`) |
/// | `<ns>:{t}:acct:<id>` | hash | ingress (cache fill) | account cache (`AccountCacheField`) |
/// | `<ns>:{t}:gen:<entry>` | string | whoever invalidates a cache entry | its generation: a fill only writes the generation it read before Postgres (`CacheInvalidation`) |
/// | `<ns>:{t}:gone:<id>` | string | worker | tombstone: the token died, answer 410 |
/// | `<ns>:{t}:stash:<id>` | list | ingress | pending stash: `<accepted ms>:` + ciphertext, oldest first |
/// | `<ns>:{t}:stash:<id>:topics` | hash | ingress | the stashed message of each Web Push Topic, by its entry's start (`HotPathScript`) |
/// | `<ns>:{t}:stash-due` | zset | ingress | subscription ids with a stash, by when its oldest message's lifetime ends (`StashExpiry`) |
/// | `<ns>:{t}:rate:pushes:<id>` | list | ingress | per-subscription sliding window: accepted times (ms), newest first (`HotPathScript`) |
/// | `<ns>:{t}:rate:<scope>:<ip>` | zset | ingress | per-IP sliding windows (`reg`, `dev`) |
/// | `<ns>:{t}:quota:<account>:<yyyymm>` | string | ingress (+1), worker (−1 on failure), admin (dropped with the account) | monthly reservations |
/// | `<ns>:{t}:circuit:<credential>:<environment>` | string | worker | APNs environment failing: answer 502 |
/// | `<ns>:{t}:topicmarks:<id>` | hash | ingress | per Web Push Topic, `<message id>:<accepted ms>` of its newest message queued; workers drop older ones of the topic (`TopicSupersession`) |
/// | `<ns>:{t}:lock:<name>` | string | any replica | short leases (`sweep`) |
/// | `<ns>:{t}:reply:<id>` | list | worker | outcomes for a sender that waits (`QueueMessage`'s reply lists) |
/// | `<ns>:{t}:retry:<stream>` | zset | worker | delayed retries: msgpack'd entry fields, scored by due time (ms) |
/// | `<ns>:{t}:counts:<stream>` | hash | worker | daily counts (`CounterField` → amount) acknowledged and not yet in Postgres |
/// | `<ns>:{t}:counts-moving:<stream>` | hash | worker | the counts one transfer to Postgres is moving, with its id, owner and time (`CountTransfer`) |
/// | `<ns>:{t}:counts:parked` | hash | worker (releases before the count transfer) | daily counts such a worker could not write; folded into the next transfer |
/// | the stream itself (`pushgate:queue:{0}`) | stream | ingress | `QueueMessage` entries, consumer group `workers` |
/// | `<stream>:dead` | stream | worker | dead letters: the entry's fields plus `dead_reason`, `dead_at` |
public struct RedisKeys: Sendable, Equatable {
    /// The queue stream pushes are added to.
    public let stream: String
    /// `<namespace>:<hash tag>:`, the start of every other key.
    public let prefix: String

    /// `stream` is the queue stream (default `WorkerConfiguration.defaultStream`); its
    /// `{…}` hash tag (or `{0}` when it has none) is reused by every key.
    public init(stream: String = WorkerConfiguration.defaultStream, namespace: String = "pushgate") {
        self.stream = stream
        prefix = "\(namespace):\(Self.hashTag(of: stream)):"
    }

    /// The `{…}` part of `name`, as Redis Cluster hashes it, or `{0}`.
    public static func hashTag(of name: String) -> String {
        explicitHashTag(of: name) ?? "{0}"
    }

    /// The `{…}` part of `name` (the first `{` up to the next `}`, not empty), if any.
    public static func explicitHashTag(of name: String) -> String? {
        guard let open = name.firstIndex(of: "{"),
            let close = name[name.index(after: open)...].firstIndex(of: "}"),
            name.index(after: open) < close
        else { return nil }
        return String(name[open...close])
    }

    public func subscription(_ id: String) -> String { prefix + "sub:" + id }
    public func app(_ id: String) -> String { prefix + "app:" + id }
    public func account(_ id: String) -> String { prefix + "acct:" + id }
    /// The generation of the cache entry `entryKey` (`subscription`, `app` or `account`).
    public func cacheGeneration(of entryKey: String) -> String { prefix + "gen:" + entryKey.dropFirst(prefix.count) }
    public func tombstone(_ subscriptionID: String) -> String { prefix + "gone:" + subscriptionID }
    public func stash(_ subscriptionID: String) -> String { prefix + "stash:" + subscriptionID }
    /// Which stashed message holds each Topic (RFC 8030 replacement).
    public func stashTopics(_ subscriptionID: String) -> String { stash(subscriptionID) + ":topics" }
    /// Everything of a subscription's pending stash: the messages and their topics.
    public func pendingStash(_ subscriptionID: String) -> [String] {
        [stash(subscriptionID), stashTopics(subscriptionID)]
    }
    /// The subscriptions with a stash, scored by when its oldest message's lifetime
    /// ends (UNIX ms; `StashExpiry` removes it then).
    public var stashesDue: String { prefix + "stash-due" }
    /// Until the list window, `rate:push:<id>` held the window as a sorted set; those
    /// keys expire on their own (ingresses of both kinds keep separate windows while
    /// a rolling upgrade lasts).
    public func pushRate(_ subscriptionID: String) -> String { prefix + "rate:pushes:" + subscriptionID }
    /// Per-client-IP window of `scope` (`reg` registration, `dev` other device endpoints).
    public func ipRate(_ scope: String, _ ip: String) -> String { prefix + "rate:\(scope):" + ip }
    /// The account's reservations for `month` (`yyyymm`, UTC).
    public func quota(account: String, month: String) -> String { prefix + "quota:\(account):\(month)" }
    /// Set by workers while a credential's APNs environment (`production`/`sandbox`) fails.
    public func circuit(credential: String, environment: String) -> String {
        prefix + "circuit:\(credential):\(environment)"
    }
    /// Per Web Push `Topic` of a subscription, `<message id>:<accepted at ms>` of its
    /// newest message queued (`HotPathScript`); a worker drops an older one of the topic
    /// (`TopicSupersession`).
    public func topicMarks(_ subscriptionID: String) -> String { prefix + Self.topicMarksPrefix + subscriptionID }
    /// What `topicMarks` puts before the subscription id (the scripts build the keys).
    public static let topicMarksPrefix = "topicmarks:"
    /// How long a subscription's topic marks live after the last one was written, and
    /// the most topics they hold (a sender naming a new topic per message starts them
    /// afresh). A message waiting longer than that is no longer compared.
    public static let topicMarksLifetimeMilliseconds = 86_400_000
    public static let topicMarksLimit = 256
    /// What a subscription leaves in Redis besides its cache entry: the pending stash,
    /// the rate window and the topic marks, deleted with it.
    public func subscriptionState(_ subscriptionID: String) -> [String] {
        pendingStash(subscriptionID) + [pushRate(subscriptionID), topicMarks(subscriptionID)]
    }
    public func lock(_ name: String) -> String { prefix + "lock:" + name }
    /// A reply list for a sender waiting for outcomes; `id` is the sender's (unique) choice.
    public func reply(_ id: String) -> String { prefix + "reply:" + id }
    /// The delayed-retry set of `stream`'s messages.
    public var retrySchedule: String { prefix + "retry:" + stream }
    /// The daily counts `stream`'s acknowledgements added up, until moved to Postgres.
    public var pendingCounts: String { prefix + "counts:" + stream }
    /// The daily counts of `stream` one transfer is moving to Postgres (`CountTransfer`).
    public var movingCounts: String { prefix + "counts-moving:" + stream }
    /// Where workers of releases before the count transfer parked the daily counts they
    /// could not write to Postgres; the next transfer in this key space takes them.
    public var legacyParkedCounts: String { prefix + "counts:parked" }
    /// Where entries go that were handed out too often without an outcome, or could not be read.
    public var deadLetters: String { stream + ":dead" }
    /// The consumer group every dispatch worker reads the stream with.
    public static let consumerGroup = "workers"

    /// `yyyymm` of `date` in UTC: the quota month.
    public static func quotaMonth(_ date: Date = Date()) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let year = Int(parts.tm_year) + 1900
        let month = Int(parts.tm_mon) + 1
        return "\(year)" + (month < 10 ? "0\(month)" : "\(month)")
    }
}
