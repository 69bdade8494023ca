import Synchronization

/// The whole per-push decision of a Web Push delivery, as one Lua script run by
/// SHA: tombstone, subscription, app and account from the cache, push enabled,
/// the per-subscription sliding window, the monthly quota, the credential and the
/// workers' circuit flag, then stash (pending) or enqueue (active) and reserve one
/// unit of quota. One round trip on the happy path; on a cache miss (an entry
/// missing, or past its freshness) it answers `.cacheMiss` and the caller fills the
/// cache from Postgres and runs it again (`HotPathCache.refresh`), allowing stale
/// entries when Postgres cannot be read.
/// One run decides a batch of pushes (`Encoder`, `RedisMultiplexer.BatchHead`), each
/// as if alone; `command(_:keys:)` is a batch of one.
///
/// Time comes from the Redis server (`TIME`), so every ingress replica shares one
/// clock for the windows and the stash's lifetime.
public enum HotPathScript {
    public static let script = RedisScript(source: source)

    /// What the script decided.
    public enum Decision: Sendable, Equatable {
        /// On the queue; the id of the stream entry that holds it with the rest of
        /// its run's pushes (format 4).
        case queued(entryID: String)
        /// In the pending stash.
        case stashed
        /// For a pending subscription, with a `TTL` of 0: nothing is kept (it only
        /// replaced its topic's stashed message), and the 201 says `TTL: 0`.
        case discarded
        /// No subscription with this id (negative cache entry).
        case notFound
        /// Tombstone: the device token died and the subscription was deleted.
        case gone
        /// App push disabled, or the account's plan has no push.
        case disabled
        /// The subscription's window is full; milliseconds until a slot frees up.
        case rateLimited(retryAfterMilliseconds: Int64)
        case quotaExceeded
        /// `check` mode: everything before the body size passed; `exists` mode: the
        /// subscription exists.
        case checked
        /// No usable credential, or the workers' circuit flag is up: `reason` is
        /// `credential_missing`, `credential_rejected` or `provider_error` (the flag,
        /// with the milliseconds it has left unless renewed; 0 if it has no expiry).
        case undeliverable(reason: String, circuitMilliseconds: Int64?)
        /// `app` mode: the subscription is not activated.
        case inactive
        /// A cache entry is missing, or `stale`: past its freshness, and this push
        /// claimed its refresh (the run did not allow stale entries). `kind` is
        /// `subscription`, `app` or `account`.
        case cacheMiss(kind: String, id: String, stale: Bool)
    }

    /// How far a Web Push request's run goes.
    public enum Scope: String, Sendable {
        /// Decides, then stashes or enqueues.
        case push
        /// For a body over the size limit: the checks up to the quota, answering
        /// `.checked` without writing anything but the rate window (and a refresh claim).
        case checkBeforeSize = "check"
        /// For a malformed request: only whether the push URL is unknown or gone,
        /// answering `.checked` if it is neither; writes nothing but, for an aged cache
        /// entry, the claim of its refresh (as every scope does).
        case existence = "exists"
    }

    /// What the script needs besides the cache.
    public struct Request: Sendable {
        public var subscriptionID: String
        public var scope: Scope
        public var rateLimit: Int
        public var rateWindowMilliseconds: Int64
        public var stashLimit: Int
        public var stashLifetimeMilliseconds: Int64
        public var quotaMonth: String
        /// Unique per request: the `Location`'s tail, also the rate window member.
        public var messageID: String
        public var ciphertext: [UInt8]
        public var priority: Int
        public var expiration: Int64
        public var collapseID: String?
        public var acceptedAt: Int64
        /// App API sends: `app` mode, and the worker answers on this reply list.
        public var replyKey: String?
        /// Cache entries past their freshness still answer (Postgres cannot be read to
        /// refresh them); set by the caller after a failed refresh.
        public var allowsStaleCache = false

        public init(
            subscriptionID: String, scope: Scope, rateLimit: Int, rateWindowMilliseconds: Int64, stashLimit: Int,
            stashLifetimeMilliseconds: Int64, quotaMonth: String, messageID: String, ciphertext: [UInt8],
            priority: Int, expiration: Int64, collapseID: String?, acceptedAt: Int64
        ) {
            self.subscriptionID = subscriptionID
            self.scope = scope
            self.rateLimit = rateLimit
            self.rateWindowMilliseconds = rateWindowMilliseconds
            self.stashLimit = stashLimit
            self.stashLifetimeMilliseconds = stashLifetimeMilliseconds
            self.quotaMonth = quotaMonth
            self.messageID = messageID
            self.ciphertext = ciphertext
            self.priority = priority
            self.expiration = expiration
            self.collapseID = collapseID
            self.acceptedAt = acceptedAt
        }

        /// The script's mode: `app`, or the scope's (`push`, `check`, `exists`); a push
        /// with a Web Push `Topic` is `t:<message id>:<accepted at>:<topic>` (a push in
        /// every other respect), so that queueing it records it as its topic's newest
        /// message (`RedisKeys.topicMarks`) without the script parsing any push's
        /// message part.
        var mode: String {
            if replyKey != nil { return "app" }
            if scope == .push, let collapseID { return "t:\(messageID):\(acceptedAt):" + collapseID }
            return scope.rawValue
        }

        /// The queue entry's message part (`QueueMessage.messagePart`), which the
        /// script passes through.
        var messagePart: [UInt8] {
            QueueMessage.messagePart(
                messageID: messageID, subscriptionID: subscriptionID, priority: priority, expiration: expiration,
                acceptedAt: acceptedAt, collapseID: collapseID, replyKey: replyKey, ciphertext: ciphertext)
        }

        /// An App API send (mode `app`): no rate window, no stash, a reply list.
        public static func appAPI(
            subscriptionID: String, quotaMonth: String, messageID: String, ciphertext: [UInt8], priority: Int,
            expiration: Int64, acceptedAt: Int64, replyKey: String
        ) -> Request {
            var request = Request(
                subscriptionID: subscriptionID, scope: .push, rateLimit: 0, rateWindowMilliseconds: 0,
                stashLimit: 0, stashLifetimeMilliseconds: 0, quotaMonth: quotaMonth, messageID: messageID,
                ciphertext: ciphertext, priority: priority, expiration: expiration, collapseID: nil,
                acceptedAt: acceptedAt)
            request.replyKey = replyKey
            return request
        }
    }

    /// Quota keys outlive their month by a few days (the worker may still release).
    public static let quotaKeyLifetimeSeconds = 40 * 86_400

    /// The most pushes one script run decides (`Encoder`'s batches): long enough to
    /// spread Redis's fixed cost per run, short enough not to hold Redis up (a push
    /// takes it some tens of microseconds).
    public static let maximumBatch = 32

    /// The `EVALSHA` command for `request` alone (a batch of one); its reply is read
    /// with `itemReply(_:)`.
    public static func command(_ request: Request, keys: RedisKeys) -> RedisCommand {
        .script(
            script, keys: [keys.stream],
            arguments: [
                keys.prefix, request.rateLimit, request.rateWindowMilliseconds, request.stashLimit,
                request.stashLifetimeMilliseconds, request.quotaMonth, quotaKeyLifetimeSeconds,
                request.allowsStaleCache ? "1" : "0", request.mode, request.subscriptionID, request.messagePart,
            ])
    }

    /// The one push's reply in the reply of `command(_:keys:)`; an error reply of the
    /// script or of the push is thrown.
    public static func itemReply(_ reply: RedisReply) throws(RedisError) -> RedisReply {
        let item = try reply.throwingError().array?.first
        guard let item else {
            throw RedisError(code: .unexpectedReply, message: "hot-path script answered an unexpected shape")
        }
        return try item.throwingError()
    }

    /// Writes Web Push requests as items of one batched `EVALSHA` (see
    /// `RedisMultiplexer.BatchHead`): a batch of one is byte for byte
    /// `command(_:keys:)`. Requests whose shared arguments match (the usual case:
    /// they only change with the quota month) share one head.
    public final class Encoder: Sendable {
        public let keys: RedisKeys
        private let sha1: String
        private let lastHead = Mutex<(shared: SharedArguments, head: RedisMultiplexer.BatchHead)?>(nil)

        /// What every push of a batch shares.
        private struct SharedArguments: Equatable {
            let rateLimit: Int
            let rateWindowMilliseconds: Int64
            let stashLimit: Int
            let stashLifetimeMilliseconds: Int64
            let quotaMonth: String
            let allowsStaleCache: Bool
        }

        public init(keys: RedisKeys) {
            self.keys = keys
            sha1 = script.sha1
        }

        public func item(_ request: Request) -> RedisMultiplexer.BatchItem {
            RedisMultiplexer.BatchItem(
                head: head(for: request), argumentCount: 3, capacity: request.ciphertext.count + 240
            ) {
                $0.append(request.mode)
                $0.append(request.subscriptionID)
                $0.append(request.messagePart)
            }
        }

        private func head(for request: Request) -> RedisMultiplexer.BatchHead {
            let shared = SharedArguments(
                rateLimit: request.rateLimit, rateWindowMilliseconds: request.rateWindowMilliseconds,
                stashLimit: request.stashLimit, stashLifetimeMilliseconds: request.stashLifetimeMilliseconds,
                quotaMonth: request.quotaMonth, allowsStaleCache: request.allowsStaleCache)
            if let last = lastHead.withLock({ $0 }), last.shared == shared { return last.head }
            let head = RedisMultiplexer.BatchHead(argumentCount: 12, script: script, maximumItems: maximumBatch) {
                $0.append("EVALSHA")
                $0.append(sha1)
                $0.append("1")
                $0.append(keys.stream)
                $0.append(keys.prefix)
                $0.append(Int64(shared.rateLimit))
                $0.append(shared.rateWindowMilliseconds)
                $0.append(Int64(shared.stashLimit))
                $0.append(shared.stashLifetimeMilliseconds)
                $0.append(shared.quotaMonth)
                $0.append(Int64(quotaKeyLifetimeSeconds))
                $0.append(shared.allowsStaleCache ? "1" : "0")
            }
            lastHead.withLock { $0 = (shared, head) }
            return head
        }
    }

    /// Reads one push's reply: the queue entry's id, a code, or `{code, …}` (the codes
    /// that carry more).
    public static func decision(from reply: RedisReply) throws(RedisError) -> Decision {
        if case .bulk = reply, let entry = reply.string { return .queued(entryID: entry) }
        let items = reply.array ?? [reply]
        guard case .integer(let code) = items.first else {
            throw RedisError(code: .unexpectedReply, message: "hot-path script answered an unexpected shape")
        }
        func text(_ index: Int) -> String? { items.count > index ? items[index].string : nil }
        switch code {
        case 1: return .notFound
        case 2: return .gone
        case 3: return .disabled
        case 4: return .rateLimited(retryAfterMilliseconds: items.count > 1 ? items[1].int ?? 1000 : 1000)
        case 5: return .quotaExceeded
        case 6: return .checked
        case 7:
            let left = items.count > 2 ? items[2].int : nil
            return .undeliverable(reason: text(1) ?? "provider_error", circuitMilliseconds: left)
        case 8: return .stashed
        case 11: return .discarded
        case 9: return .inactive
        case 10:
            guard let kind = text(1), let id = text(2) else { break }
            return .cacheMiss(kind: kind, id: id, stale: text(3) == "stale")
        default: break
        }
        throw RedisError(code: .unexpectedReply, message: "hot-path script answered an unknown code")
    }

    // KEYS: 1 the queue stream
    // ARGV: 1 key prefix, 2 rate limit, 3 window ms, 4 stash limit, 5 stash lifetime ms,
    //       6 quota month, 7 quota key lifetime s, 8 '1' if stale cache entries may answer;
    //       then 3 per push: mode (push|check|exists|app, or t:<message id>:<accepted at>:<topic>),
    //       subscription id, the entry's message part (`QueueMessage.messagePart`:
    //       packed, the ciphertext first)
    // Reply: one element per push, in order: the run's queue entry's id (queued), a code,
    // {code, …} for the codes that carry more (4, 7, 10: kind, id and 'stale' when the
    // entry is there but past its freshness), or that push's error. (A
    // table per push would cost Redis a conversion that looks for `err`, `ok` and
    // other fields in it.)
    //
    // Each push is decided as if alone (at the same server time `now`); an error in
    // one (a wrong key type, say) fails only that push's element. A batch reads each
    // app, account and circuit flag once, and builds their keys once: nothing in it
    // writes them (but a refresh claim's `fresh`, below, which only decides the
    // claiming push's answer), and the run is atomic, so every push sees what it would
    // have read itself. The per-push keys are built here from the prefix and the id, like the
    // app/account/quota/circuit keys: all carry the stream's hash tag (`RedisKeys`).
    // Cache entries carry `fresh` (Redis time, UNIX ms, written by the fill) and live
    // longer than that (`CACHE_STALE_TTL_SECONDS`). Past it, the first push to find an
    // entry claims its refresh: `fresh` moves a lease (5 s) ahead and that push answers
    // the miss, to read the entry again from Postgres, while the others (in this run and
    // the next ones, on any replica) go on with it, so an app's thousands of pushes do not
    // all ask Postgres at once when its entry ages. The fill replaces the entry; a refresh
    // that fails (Postgres cannot be read) runs the push again allowing stale entries,
    // and leaves the next claim to the lease's end. An entry without `fresh` (an older
    // layout) is fresh while it lives.
    // Mode `app` (App API sends): no per-subscription rate window, a pending
    // subscription answers 9 (inactive) instead of being stashed (the message part
    // carries the reply list). Code 7 carries the reason (`credential_missing`, …).
    //
    // Every `redis.call` costs Redis a command lookup and a reply round trip through
    // Lua, every argument an object, and every write one more AOF record, so the
    // usual push makes as few calls with as few arguments as the decision needs:
    // - The subscription's entry is read as three values: its context (`ctx`: state,
    //   sandbox and app id in one text, made into a record once per run like apps),
    //   the entry's part and the window's expiry mark.
    // - The tombstone is read only when the subscription has no live cache entry (a
    //   cache fill never writes one over a tombstone, `HotPathCache`), which keeps
    //   "a tombstone answers 410 first" without an `EXISTS` per push.
    // - The queue entry is format 4 (`QueueMessage`): one entry per run, added once
    //   every push is decided, holds each queued push as three values: the
    //   subscription's part as the cache keeps it and the message's part as the ingress
    //   packed it pass through untouched; the script adds what it decided (account,
    //   credential, quota key) as one packed value, made once per app and run. One
    //   XADD per run instead of one per push, and the worker reads, acknowledges and
    //   deletes one entry per run. Should that XADD fail, none of the run's pushes is
    //   queued: each queued push's element is the error, and nothing is reserved.
    // - A queued push with a Web Push `Topic` (mode `t:<message id>:<accepted at>:<topic>`)
    //   records `<message id>:<accepted at>` as the topic's newest in the subscription's
    //   topic marks (RFC 8030 section 5.4: it replaces any outstanding message of the
    //   topic; a worker drops an older one it meets, `TopicSupersession`). Written once the
    //   run's entry is on the stream, in the run's order, so a push refused or not queued
    //   replaces nothing. Only such pushes pay for it (HSET and PEXPIRE; HLEN, DEL and
    //   HSET again when a new topic passes the limit); the others cost one byte test.
    // - Times go to Redis as strings made once per run (a Lua number argument costs
    //   Redis a float formatting).
    // - The quota is counted in the run and written once per quota key at its end
    //   (INCRBY; EXPIRE when the run created the key): each push sees the count before
    //   the run (one GET, only when the account has a limit) plus what the pushes
    //   before it reserved, which is what it would have read alone, since the run is
    //   atomic. A refusal that comes after the quota in the answer order (no
    //   credential, circuit flag) reserves nothing.
    // - The sliding window is exact: a list of the subscription's accepted times (ms),
    //   newest first. Times only grow and a push stays only while fewer than the limit
    //   were in the window, so the window never holds more than the limit. The push's
    //   time is added first (LPUSH answers the length): while the list is no longer
    //   than the limit, that is the whole check (one write). Otherwise the limit-th
    //   newest time before it is read (LINDEX); if it is still in the window (newer than
    //   now − window) the push is refused and its time taken back (LPOP), and that time
    //   plus the window is when a slot frees up. Older times are left behind and cut off
    //   in one LTRIM when the list reaches twice the limit (bounded like the window
    //   itself, at no write per push).
    // - The window's list gets an expiry (PEXPIREAT, twice the window ahead) when LPUSH
    //   makes it new, and a later one only when less than a window of it is left, so
    //   every time outlives its window. Instead of a PTTL per push, the subscription's
    //   cache entry keeps the expiry last renewed (`rexp`, read with the entry; never
    //   later than the list's own). An entry without it (just filled) renews; a list
    //   deleted meanwhile comes back new (LPUSH answers 1) with an expiry of its own.
    static let source = """
        local stream, prefix = KEYS[1], ARGV[1]
        local rateLimit, window = tonumber(ARGV[2]), tonumber(ARGV[3])
        local stashLimit, stashLifetime = tonumber(ARGV[4]), ARGV[5]
        local quotaMonth, quotaLifetime, staleAllowed = ARGV[6], ARGV[7], ARGV[8] == '1'
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        -- Whether a cache entry with this `fresh` is past it (and the run does not allow
        -- stale entries).
        local function aged(fresh) return fresh and not staleAllowed and tonumber(fresh) < now end
        -- Claims the refresh of the aged entry at `key` for the push about to answer
        -- `miss` (only then, so no claim is made that no push answers): its `fresh` moves
        -- to the lease's end.
        local refreshLeaseText = tostring(now + 5000)
        local function claimRefresh(key, miss)
          redis.call('HSET', key, 'fresh', refreshLeaseText)
          return miss
        end
        -- Whole milliseconds (13 digits) print exactly with Lua's %.14g.
        local nowText, windowStart = tostring(now), now - window
        -- When a rate window's expiry set now ends (PEXPIREAT: exactly what `rexp` says).
        local rateExpiryText = tostring(now + 2 * window)
        -- Stash entries that start at or before this are past their lifetime.
        local stashOldest = now - tonumber(stashLifetime)
        -- The rate window's index of the rateLimit-th newest push before (after) this
        -- one is added, and when to trim it.
        local lastIndexText, rateLimitText, trimLength = tostring(rateLimit - 1), tostring(rateLimit), 2 * rateLimit
        -- What the batch has read and made of apps and accounts, by id.
        local apps, accounts = {}, {}
        -- The run's queue entry (format 4): its version, then three values per queued push.
        local entryFields = {'v', '4'}
        -- Topic marks to write once the entry is on the stream: subscription, topic, message id.
        local topicMarks = {}

        -- What the stash keeps of a message part (`QueueMessage.messagePart`): its
        -- first item, the ciphertext; its seventh, the Web Push Topic (an optional
        -- item: its length plus one, 0 for none), or nil; and from its fifth and sixth
        -- (the APNs expiration, UNIX s, 0 for TTL 0, and the acceptance, UNIX ms) the
        -- push's TTL in ms. Each item follows its LEB128 length.
        local function stashedParts(message)
          local i, start, length = 1, 1, 0
          local ciphertext, expiration, acceptedAt
          for item = 1, 7 do
            local scale = 1
            length = 0
            while true do
              local byte = string.byte(message, i)
              i = i + 1
              length = length + (byte % 128) * scale
              if byte < 128 then break end
              scale = scale * 128
            end
            start = i
            i = i + length
            if item == 1 then
              ciphertext = string.sub(message, start, i - 1)
            elseif item == 5 then
              expiration = tonumber(string.sub(message, start, i - 1))
            elseif item == 6 then
              acceptedAt = tonumber(string.sub(message, start, i - 1))
            end
          end
          local topic = length > 0 and string.sub(message, start, start + length - 2) or nil
          local ttl = expiration == 0 and 0 or (expiration - math.floor(acceptedAt / 1000)) * 1000
          return ciphertext, topic, ttl
        end

        -- A stash entry's start: its time and the message's salt (the ciphertext's
        -- first 16 bytes, random per message), which names it in the topics hash.
        local function entryStart(entry)
          local colon = string.find(entry, ':', 1, true)
          return colon and string.sub(entry, 1, colon + 16)
        end

        -- An account: its key, limit and quota key, the count before the run (`used`,
        -- read once, when the limit needs it), what the run's pushes reserved and, when
        -- its entry has aged, the miss answer for the first push to meet it (`refresh`);
        -- or the miss answer.
        local function readAccount(id)
          local key = prefix .. 'acct:' .. id
          local account = redis.call('HMGET', key, 'limit', 'fresh')
          local limit = account[1]
          if not limit then return {miss = {10, 'account', id}} end
          return {
            key = key, limit = tonumber(limit), quotaKey = prefix .. 'quota:' .. id .. ':' .. quotaMonth,
            reserved = 0, refresh = aged(account[2]) and {10, 'account', id, 'stale'} or nil,
          }
        end

        -- Texts packed as `PackedFields` packs them: each after its length (LEB128).
        local function packed(...)
          local parts = {}
          for i = 1, select('#', ...) do
            local text = select(i, ...)
            local length, lengthBytes = #text, ''
            while length >= 128 do
              lengthBytes = lengthBytes .. string.char(128 + length % 128)
              length = math.floor(length / 128)
            end
            parts[i] = lengthBytes .. string.char(length) .. text
          end
          return table.concat(parts)
        end

        -- An app with its account, what follows from them for every push (disabled, the
        -- credential's refusal, the entry's decision part), its circuit flags by
        -- `sandbox` value, its key and `refresh` (as accounts); or the miss answer.
        local function readApp(id)
          local key = prefix .. 'app:' .. id
          local app = redis.call('HMGET', key, 'acct', 'enabled', 'cred', 'cstatus', 'fresh')
          local accountID = app[1]
          if not accountID then return {miss = {10, 'app', id}} end
          local account = accounts[accountID]
          if not account then
            account = readAccount(accountID)
            accounts[accountID] = account
          end
          if account.miss then return account end
          local credential = app[3] or ''
          local refusal = false
          if credential == '' then
            refusal = 'credential_missing'
          elseif app[4] ~= 'active' then
            refusal = 'credential_rejected'
          end
          return {
            disabled = app[2] ~= '1' or account.limit == 0, account = account, credential = credential,
            refusal = refusal, circuit = {}, decision = packed(accountID, credential, account.quotaKey),
            key = key, refresh = aged(app[5]) and {10, 'app', id, 'stale'} or nil,
          }
        end

        -- The circuit flag's remaining lifetime in ms (the 502's `Retry-After`), or
        -- false when it is down. PTTL costs what EXISTS did.
        local function circuitOpen(app, sandbox)
          local open = app.circuit[sandbox]
          if open == nil then
            local environment = sandbox == '1' and 'sandbox' or 'production'
            local left = redis.call('PTTL', prefix .. 'circuit:' .. app.credential .. ':' .. environment)
            open = left ~= -2 and math.max(left, 0)
            app.circuit[sandbox] = open
          end
          return open
        end

        -- What the run made of subscription contexts (`ctx`), by their text.
        local contexts = {}
        local function context(text)
          local state, sandbox, appID = string.match(text, '^(%a+):(%d):(.*)$')
          local app = apps[appID]
          if not app then
            app = readApp(appID)
            apps[appID] = app
          end
          return {app = app, active = state == 'active', sandbox = sandbox}
        end

        local function decide(mode, id, message)
          local subKey = prefix .. 'sub:' .. id
          local sub = redis.call('HMGET', subKey, 'ctx', 'part', 'rexp', 'fresh')
          if not (sub[1] and sub[2]) then
            if redis.call('EXISTS', prefix .. 'gone:' .. id) == 1 then return 2 end
            if redis.call('HEXISTS', subKey, 'missing') == 1 then return 1 end
            -- No entry, or one of an older layout.
            return {10, 'subscription', id}
          end
          if aged(sub[4]) then return claimRefresh(subKey, {10, 'subscription', id, 'stale'}) end
          if mode == 'exists' then return 6 end
          local ctx = contexts[sub[1]]
          if not ctx then
            ctx = context(sub[1])
            contexts[sub[1]] = ctx
          end
          local app = ctx.app
          if app.miss then return app.miss end
          local aging = app.refresh and app or (app.account.refresh and app.account)
          if aging then
            local miss = aging.refresh
            aging.refresh = nil
            return claimRefresh(aging.key, miss)
          end
          if app.disabled then return 3 end
          if mode ~= 'app' then
            local rate = prefix .. 'rate:pushes:' .. id
            local length = redis.call('LPUSH', rate, nowText)
            if length > rateLimit then
              local last = tonumber(redis.call('LINDEX', rate, rateLimitText))
              if last > windowStart then
                redis.call('LPOP', rate)
                return {4, last + window - now}
              end
              if length > trimLength then redis.call('LTRIM', rate, 0, lastIndexText) end
            end
            if length == 1 then
              redis.call('PEXPIREAT', rate, rateExpiryText)
            elseif (tonumber(sub[3]) or 0) - now < window then
              redis.call('PEXPIREAT', rate, rateExpiryText)
              redis.call('HSET', subKey, 'rexp', rateExpiryText)
            end
          end
          if not ctx.active then
            if mode == 'app' then return 9 end
            if mode == 'check' then return 6 end
            local body, topic, ttl = stashedParts(message)
            local stash = prefix .. 'stash:' .. id
            local topics = stash .. ':topics'
            -- RFC 8030, section 5.4: a push replaces the outstanding message of its
            -- topic. Entries keep their format (readers of every version); the topics
            -- hash names each topic's entry by its start (`entryStart`).
            local previous = topic and redis.call('HGET', topics, topic)
            -- One pass over the stash: entries past their own lifetime (lifetimes
            -- differ by TTL, and the list's expiry follows its newest) and the one this
            -- push replaces leave; the starts of the rest are kept for the topics below.
            local kept = {}
            for _, stashed in ipairs(redis.call('LRANGE', stash, 0, -1)) do
              local start = entryStart(stashed)
              local time = tonumber(string.match(stashed, '^%d+'))
              if (time and time <= stashOldest) or (previous and start == previous) then
                redis.call('LREM', stash, 1, stashed)
                if start == previous then previous = nil end
              else
                kept[#kept + 1] = start
              end
            end
            -- Kept for the shorter of its TTL and the stash's lifetime (RFC 8030
            -- section 5.2); a TTL of 0 is not kept at all (no device is listening),
            -- though it still replaced its topic's message.
            local keep = math.min(ttl, tonumber(stashLifetime))
            if keep <= 0 then
              if topic then redis.call('HDEL', topics, topic) end
              return 11
            end
            -- An entry's time is where its lifetime would start had it the stash's
            -- whole lifetime (a shorter TTL moves it back), so every reader, of every
            -- version, finds its end at that time plus STASH_TTL.
            local entry = tostring(now + keep - tonumber(stashLifetime)) .. ':' .. body
            if topic then
              redis.call('HSET', topics, topic, entryStart(entry))
              redis.call('PEXPIRE', topics, stashLifetime)
            end
            redis.call('RPUSH', stash, entry)
            redis.call('LTRIM', stash, -stashLimit, -1)
            redis.call('PEXPIRE', stash, stashLifetime)
            -- Topics whose message left (trimmed, expired) are forgotten once the hash
            -- holds more than the stash can: it stays as small as the stash.
            if topic and redis.call('HLEN', topics) > stashLimit then
              kept[#kept + 1] = entryStart(entry)
              local present = {}
              for i = math.max(1, #kept - stashLimit + 1), #kept do present[kept[i]] = true end
              local named = redis.call('HGETALL', topics)
              for i = 1, #named, 2 do
                if not present[named[i + 1]] then redis.call('HDEL', topics, named[i]) end
              end
            end
            -- The list's expiry follows its newest message: `StashExpiry` removes each
            -- one when its own lifetime ends (LT: an earlier end already noted stays).
            redis.call('ZADD', prefix .. 'stash-due', 'LT', tostring(now + keep), id)
            return 8
          end
          local refusal, circuitLeft = false, false
          if mode ~= 'check' then
            refusal = app.refusal
            if not refusal then
              circuitLeft = circuitOpen(app, ctx.sandbox)
              refusal = circuitLeft and 'provider_error'
            end
          end
          local account = app.account
          if account.limit > 0 then
            if not account.used then account.used = tonumber(redis.call('GET', account.quotaKey) or '0') end
            if account.used + account.reserved >= account.limit then return 5 end
          end
          if mode == 'check' then return 6 end
          if circuitLeft then return {7, refusal, circuitLeft} end
          if refusal then return {7, refusal} end
          local n = #entryFields
          entryFields[n + 1], entryFields[n + 2], entryFields[n + 3] = 's', sub[2], 'm'
          entryFields[n + 4], entryFields[n + 5], entryFields[n + 6] = message, 'd', app.decision
          account.reserved = account.reserved + 1
          if string.byte(mode, 1) == 116 then -- 't': a push with a topic
            local mark, topic = string.match(mode, '^t:([^:]+:%d+):(.+)$')
            if mark then topicMarks[#topicMarks + 1] = {id, topic, mark} end
          end
          return true
        end

        local results, count, queued = {}, 0, {}
        for base = 9, #ARGV, 3 do
          local ok, result = pcall(decide, ARGV[base], ARGV[base + 1], ARGV[base + 2])
          if not ok then result = {err = type(result) == 'table' and result.err or tostring(result)} end
          count = count + 1
          if result == true then queued[#queued + 1] = count end
          results[count] = result
        end
        if #queued == 0 then return results end
        local added, entry = pcall(redis.call, 'XADD', stream, '*', unpack(entryFields))
        if not added then
          local failure = {err = type(entry) == 'table' and entry.err or tostring(entry)}
          for _, index in ipairs(queued) do results[index] = failure end
          return results
        end
        for _, index in ipairs(queued) do results[index] = entry end
        -- Each queued topic's newest message (see above); pcall, as below: the pushes
        -- are queued already. The key prefix, the most topics and the lifetime (ms) are
        -- RedisKeys.topicMarksPrefix, topicMarksLimit and topicMarksLifetimeMilliseconds
        -- (written out: `scripts/bench hotpath` runs this text as it stands).
        for _, mark in ipairs(topicMarks) do
          local key = prefix .. 'topicmarks:' .. mark[1]
          local length = redis.pcall('HSET', key, mark[2], mark[3]) == 1 and redis.pcall('HLEN', key)
          if type(length) == 'number' and length > 256 then
            redis.pcall('DEL', key)
            redis.pcall('HSET', key, mark[2], mark[3])
          end
          redis.pcall('PEXPIRE', key, '86400000')
        end
        -- The run's reservations, one write per quota key; a key this run created
        -- gets its lifetime. Its pushes are on the queue by now, so an error here
        -- (a key of the wrong type) must not turn their answers into failures:
        -- pcall, and the count of that key is left as it was.
        for _, account in pairs(accounts) do
          if account.reserved and account.reserved > 0
            and redis.pcall('INCRBY', account.quotaKey, account.reserved) == account.reserved then
            redis.call('EXPIRE', account.quotaKey, quotaLifetime)
          end
        end
        return results
        """
}
