import Shared

/// The worker's Lua scripts: each moves an entry between the stream, the
/// delayed-retry set and the dead-letter stream atomically, so an entry is never
/// lost or doubled between them. Time comes from the Redis server (`TIME`), so
/// every worker shares one clock for retry due times.
enum QueueScripts {
    /// Records the outcomes of entries whose messages are all settled
    /// (`PendingEntry`): for each entry the group still has pending, `XACK`, `XDEL`,
    /// and for each of its messages as its outcome requires a quota release (`DECR`),
    /// a reply (`RPUSH` + `EXPIRE`), a delayed retry (`ZADD` of the message's fields,
    /// msgpack'd, scored by the due time) and a daily count (`HINCRBY` of the stream's
    /// counts hash, which `CountTransfer` moves to Postgres). An entry no longer
    /// pending (this very write already ran but its answer was lost, or another worker
    /// claimed and finished it) changes nothing, so a retried write never releases a
    /// quota, answers, schedules a retry or counts twice.
    ///
    /// Entries with nothing but the acknowledgement to record (every message `sent`)
    /// come first, as bare ids, and are acknowledged and deleted together, one `XACK`
    /// and one `XDEL` per 500: Redis pays its per-command cost (and writes its AOF
    /// record) once per batch, not per entry. An entry of ours that is no longer
    /// pending was acknowledged by a script that deleted it in the same run (this one
    /// or the dead-letter script), so when an `XACK` finds fewer pending than it was
    /// given (rare: a duplicate delivery, or a repeated write), the ones it did
    /// acknowledge are those still in the stream, and only they are counted.
    ///
    /// KEYS: 1 stream, 2 delayed-retry set, 3 counts hash. ARGV: 1 group, 2 reply
    /// lifetime in seconds, 3 the number of counters, their fields (`CounterField`,
    /// numbered from 1 in this order); then the number of plain entries, their ids,
    /// and in the same order each one's counts: records of 8 bytes, a counter's number
    /// and how many of the entry's messages it counts (both big-endian 32-bit); then
    /// per other entry its id and its number of messages, and per message six values
    /// and its retry fields: quota key or "", reply list or "", reply JSON, retry
    /// delay in ms, its counter's number (0: none), the number of retry fields (0: no
    /// retry), those fields.
    /// Returns how many entries were acknowledged.
    static let acknowledge = RedisScript(
        source: """
            local counters = tonumber(ARGV[3])
            local added = {}
            local acknowledged = 0
            local plain = tonumber(ARGV[4 + counters])
            local plainStart = 5 + counters
            local plainEnd = plainStart + plain - 1
            local stale
            for first = plainStart, plainEnd, 500 do
              local last = math.min(first + 499, plainEnd)
              local acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, first, last))
              if acked < last - first + 1 then
                stale = stale or {}
                for j = first, last do
                  if acked == 0 or #redis.call('XRANGE', KEYS[1], ARGV[j], ARGV[j]) == 0 then stale[j] = true end
                end
              end
              redis.call('XDEL', KEYS[1], unpack(ARGV, first, last))
              acknowledged = acknowledged + acked
            end
            for j = plainStart, plainEnd do
              if not (stale and stale[j]) then
                local records = ARGV[j + plain]
                for at = 1, #records, 8 do
                  local counter, messages = struct.unpack('>I4I4', records, at)
                  added[counter] = (added[counter] or 0) + messages
                end
              end
            end
            local now
            local i = plainEnd + plain + 1
            while i <= #ARGV do
              local id, messages = ARGV[i], tonumber(ARGV[i + 1])
              local live = redis.call('XACK', KEYS[1], ARGV[1], id) == 1
              if live then
                redis.call('XDEL', KEYS[1], id)
                acknowledged = acknowledged + 1
              end
              i = i + 2
              for _ = 1, messages do
                local retryFields = tonumber(ARGV[i + 5])
                if live then
                  -- A month's key gone (expired 40 days on) is not made again at -1.
                  if ARGV[i] ~= '' and redis.call('EXISTS', ARGV[i]) == 1 then redis.call('DECR', ARGV[i]) end
                  if ARGV[i + 1] ~= '' then
                    redis.call('RPUSH', ARGV[i + 1], ARGV[i + 2])
                    redis.call('EXPIRE', ARGV[i + 1], ARGV[2])
                  end
                  local counter = tonumber(ARGV[i + 4])
                  if counter > 0 then added[counter] = (added[counter] or 0) + 1 end
                  if retryFields > 0 then
                    if not now then
                      local t = redis.call('TIME')
                      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
                    end
                    local fields = {unpack(ARGV, i + 6, i + 5 + retryFields)}
                    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[i + 3]), cmsgpack.pack(fields))
                  end
                end
                i = i + 6 + retryFields
              end
            end
            for counter, amount in pairs(added) do
              if amount > 0 then redis.call('HINCRBY', KEYS[3], ARGV[3 + counter], amount) end
            end
            return acknowledged
            """)

    /// Claims a page of the entries pending longer than the visibility timeout under
    /// other consumers (`XPENDING … IDLE`, then `XCLAIM`, which skips any that became
    /// active meanwhile), with their delivery counts, so entries handed out too often
    /// can be dead-lettered. Never the consumer's own: those are either still being
    /// sent here (a send may outlast a short visibility timeout; taking it again would
    /// send it twice) or orphans of a lost read, which the consumer's sweep takes back
    /// (`QueueConsumer.takeOrphans`).
    ///
    /// KEYS: 1 stream. ARGV: 1 group, 2 consumer, 3 min idle ms, 4 cursor (an entry
    /// id, exclusive; '0-0' for the first page), 5 count. Returns `{next cursor ('0-0'
    /// when done), {{id, {fields…}, delivery count}…}}`; an entry deleted meanwhile only
    /// leaves the pending list.
    static let claim = RedisScript(
        source: """
            local count = tonumber(ARGV[5])
            local start = ARGV[4] == '0-0' and '-' or '(' .. ARGV[4]
            local pending = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', tonumber(ARGV[3]), start, '+', count)
            local ids, deliveries = {}, {}
            for _, entry in ipairs(pending) do
              if entry[2] ~= ARGV[2] then
                ids[#ids + 1] = entry[1]
                deliveries[entry[1]] = entry[4] + 1
              end
            end
            local out = {}
            if #ids > 0 then
              for _, entry in ipairs(redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), unpack(ids))) do
                if entry and entry[2] then out[#out + 1] = {entry[1], entry[2], deliveries[entry[1]]} end
              end
            end
            if #pending < count then return {'0-0', out} end
            return {pending[#pending][1], out}
            """)

    /// The entries pending for the consumer itself after a cursor, claimed again by it
    /// (`XCLAIM` with no minimum idle time), with their delivery counts: what a process
    /// of the same name read and never acknowledged before it died.
    ///
    /// KEYS: 1 stream. ARGV: 1 group, 2 consumer, 3 cursor (an entry id, exclusive; '-'
    /// for the first), 4 count. Returns `{next cursor ('' when done), {{id, {fields…},
    /// delivery count}…}}`; an entry deleted meanwhile only leaves the pending list.
    static let claimOwn = RedisScript(
        source: """
            local start = ARGV[3] == '-' and '-' or '(' .. ARGV[3]
            local pending = redis.call('XPENDING', KEYS[1], ARGV[1], start, '+', tonumber(ARGV[4]), ARGV[2])
            if #pending == 0 then return {'', {}} end
            local ids, deliveries = {}, {}
            for i, entry in ipairs(pending) do
              ids[i] = entry[1]
              deliveries[entry[1]] = entry[4] + 1
            end
            local out = {}
            for _, entry in ipairs(redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(ids))) do
              if entry and entry[2] then out[#out + 1] = {entry[1], entry[2], deliveries[entry[1]]} end
            end
            return {ids[#ids], out}
            """)

    /// Moves due retries back onto the stream as new entries. Any worker may run it.
    ///
    /// KEYS: 1 retry set, 2 stream. ARGV: 1 at most this many. Returns how many moved.
    static let promoteRetries = RedisScript(
        source: """
            local t = redis.call('TIME')
            local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
            for _, member in ipairs(due) do
              redis.call('ZREM', KEYS[1], member)
              redis.call('XADD', KEYS[2], '*', unpack(cmsgpack.unpack(member)))
            end
            return #due
            """)

    /// Moves an entry to the dead-letter stream with its reason, acknowledges and
    /// deletes it, and for each of its messages (none when it cannot be read)
    /// releases the quota reservation, answers the reply list and counts a failure
    /// of the day, all unless it was acknowledged already.
    ///
    /// Dead letters hold device tokens and ciphertext, so they are kept for a
    /// lifetime only: each addition trims those older than it (`MINID`, by the ids'
    /// Redis time) and the stream expires that long after its newest. At most 100,000.
    ///
    /// KEYS: 1 stream, 2 dead-letter stream, 3 counts hash. ARGV: 1 group, 2 entry id,
    /// 3 reason, 4 reply TTL s, 5 dead-letter lifetime s, 6 the number of messages,
    /// then per message its quota key, its reply list or "", the reply JSON and its
    /// `failed` counter's field (`CounterField`); then the entry's fields.
    static let deadLetter = RedisScript(
        source: """
            if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
            local t = redis.call('TIME')
            local messagesEnd = 6 + 4 * tonumber(ARGV[6])
            local fields = {unpack(ARGV, messagesEnd + 1)}
            fields[#fields + 1] = 'dead_reason'
            fields[#fields + 1] = ARGV[3]
            fields[#fields + 1] = 'dead_at'
            fields[#fields + 1] = t[1]
            -- Whole milliseconds (13 digits) print exactly with Lua's %.14g.
            local oldest = tostring((tonumber(t[1]) - tonumber(ARGV[5])) * 1000) .. '-0'
            -- Exact: approximate trimming only drops whole nodes of 100 entries.
            redis.call('XADD', KEYS[2], 'MINID', oldest, '*', unpack(fields))
            redis.call('XTRIM', KEYS[2], 'MAXLEN', '~', 100000)
            redis.call('EXPIRE', KEYS[2], ARGV[5])
            redis.call('XDEL', KEYS[1], ARGV[2])
            for i = 7, messagesEnd, 4 do
              if redis.call('EXISTS', ARGV[i]) == 1 then redis.call('DECR', ARGV[i]) end
              if ARGV[i + 1] ~= '' then
                redis.call('RPUSH', ARGV[i + 1], ARGV[i + 2])
                redis.call('EXPIRE', ARGV[i + 1], ARGV[4])
              end
              redis.call('HINCRBY', KEYS[3], ARGV[i + 3], 1)
            end
            return 1
            """)
}
