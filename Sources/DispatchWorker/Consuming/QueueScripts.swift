import Shared

/// The worker's Lua scripts: each moves an entry between the stream, the
/// delayed-retry set and the dead-letter stream atomically, so an entry is never
/// lost or doubled between them. Time comes from the Redis server (`TIME`), so
/// every worker shares one clock for retry due times.
enum QueueScripts {
    /// Records the outcomes of entries whose messages are all settled
    /// (`PendingEntry`): for each entry the group still has pending, `XACK`, `XDEL`,
    /// and for each of its messages as its outcome requires a quota release (`DECR`),
    /// a reply (`RPUSH` + `EXPIRE`) or a delayed retry (`ZADD` of the message's fields,
    /// msgpack'd, scored by the due time). An entry no longer pending (this very write
    /// already ran but its answer was lost, or another worker claimed and finished it)
    /// changes nothing, so a retried write never releases a quota, answers or
    /// schedules a retry twice.
    ///
    /// Entries with nothing but the acknowledgement to record (every message `sent`)
    /// come first, as bare ids, and are acknowledged and deleted together, one `XACK`
    /// and one `XDEL` per 500: Redis pays its per-command cost (and writes its AOF
    /// record) once per batch, not per entry, and each such entry costs one argument.
    /// Deleting them without asking which were still pending changes nothing: an
    /// entry of ours that is no longer pending was acknowledged by a script that
    /// deleted it in the same run (this one or the dead-letter script).
    ///
    /// KEYS: 1 stream, 2 delayed-retry set. ARGV: 1 group, 2 reply lifetime in seconds,
    /// 3 the number of plain entries, their ids, then per other entry its id and its
    /// number of messages, and per message five values and its retry fields: quota key
    /// or "", reply list or "", reply JSON, retry delay in ms, the number of retry
    /// fields (0: no retry), those fields.
    /// Returns how many entries were acknowledged.
    static let acknowledge = RedisScript(
        source: """
            local acknowledged = 0
            local plainEnd = 3 + tonumber(ARGV[3])
            for first = 4, plainEnd, 500 do
              local last = math.min(first + 499, plainEnd)
              acknowledged = acknowledged + redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, first, last))
              redis.call('XDEL', KEYS[1], unpack(ARGV, first, last))
            end
            local now
            local i = plainEnd + 1
            while i <= #ARGV do
              local id, messages = ARGV[i], tonumber(ARGV[i + 1])
              local live = redis.call('XACK', KEYS[1], ARGV[1], id) == 1
              if live then
                redis.call('XDEL', KEYS[1], id)
                acknowledged = acknowledged + 1
              end
              i = i + 2
              for _ = 1, messages do
                local retryFields = tonumber(ARGV[i + 4])
                if live then
                  -- A month's key gone (expired 40 days on) is not made again at -1.
                  if ARGV[i] ~= '' and redis.call('EXISTS', ARGV[i]) == 1 then redis.call('DECR', ARGV[i]) end
                  if ARGV[i + 1] ~= '' then
                    redis.call('RPUSH', ARGV[i + 1], ARGV[i + 2])
                    redis.call('EXPIRE', ARGV[i + 1], ARGV[2])
                  end
                  if retryFields > 0 then
                    if not now then
                      local t = redis.call('TIME')
                      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
                    end
                    local fields = {unpack(ARGV, i + 5, i + 4 + retryFields)}
                    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[i + 3]), cmsgpack.pack(fields))
                  end
                end
                i = i + 5 + retryFields
              end
            end
            return acknowledged
            """)

    /// `XAUTOCLAIM` plus each claimed entry's delivery count (from `XPENDING`), so
    /// entries handed out too often can be dead-lettered.
    ///
    /// KEYS: 1 stream. ARGV: 1 group, 2 consumer, 3 min idle ms, 4 cursor, 5 count.
    /// Returns `{next cursor, {{id, {fields…}, delivery count}…}}`.
    static let claim = RedisScript(
        source: """
            local claimed = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4], 'COUNT', ARGV[5])
            local out = {}
            for _, entry in ipairs(claimed[2]) do
              if entry[2] then
                local pending = redis.call('XPENDING', KEYS[1], ARGV[1], entry[1], entry[1], 1)
                local count = 1
                if pending[1] then count = pending[1][4] end
                out[#out + 1] = {entry[1], entry[2], count}
              end
            end
            return {claimed[1], out}
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
    /// releases the quota reservation and answers the reply list, all unless it was
    /// acknowledged already.
    ///
    /// Dead letters hold device tokens and ciphertext, so they are kept for a
    /// lifetime only: each addition trims those older than it (`MINID`, by the ids'
    /// Redis time) and the stream expires that long after its newest. At most 100,000.
    ///
    /// KEYS: 1 stream, 2 dead-letter stream. ARGV: 1 group, 2 entry id, 3 reason,
    /// 4 reply TTL s, 5 dead-letter lifetime s, 6 the number of messages, then per
    /// message its quota key, its reply list or "" and the reply JSON; then the entry's fields.
    static let deadLetter = RedisScript(
        source: """
            if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
            local t = redis.call('TIME')
            local messagesEnd = 6 + 3 * tonumber(ARGV[6])
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
            for i = 7, messagesEnd, 3 do
              if redis.call('EXISTS', ARGV[i]) == 1 then redis.call('DECR', ARGV[i]) end
              if ARGV[i + 1] ~= '' then
                redis.call('RPUSH', ARGV[i + 1], ARGV[i + 2])
                redis.call('EXPIRE', ARGV[i + 1], ARGV[4])
              end
            end
            return 1
            """)
}
