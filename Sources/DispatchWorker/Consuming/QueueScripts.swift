import Shared

/// The worker's Lua scripts: each moves an entry between the stream, the
/// delayed-retry set and the dead-letter stream atomically, so an entry is never
/// lost or doubled between them. Time comes from the Redis server (`TIME`), so
/// every worker shares one clock for retry due times.
enum QueueScripts {
    /// Records final outcomes: for each entry the group still has pending, `XACK`,
    /// `XDEL`, and as its outcome requires a quota release (`DECR`) and a reply
    /// (`RPUSH` + `EXPIRE`). An entry no longer pending (this very write already ran
    /// but its answer was lost, or another worker claimed and finished it) changes
    /// nothing, so a retried write never releases a quota twice or answers twice.
    ///
    /// Entries with nothing but the acknowledgement to record (the usual `sent`) come
    /// first, as bare ids, and are acknowledged and deleted together, one `XACK` and
    /// one `XDEL` per 500: Redis pays its per-command cost (and writes its AOF record)
    /// once per batch, not per entry, and each such entry costs one argument, not four.
    /// Deleting them without asking which were still pending changes nothing: an
    /// entry of ours that is no longer pending was acknowledged by a script that
    /// deleted it in the same run (this one, the retry or the dead-letter script).
    ///
    /// KEYS: 1 stream. ARGV: 1 group, 2 reply lifetime in seconds, 3 the number of
    /// plain entries, their ids, then per other entry four values: id, quota key or "",
    /// reply list or "", reply JSON.
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
            for i = plainEnd + 1, #ARGV, 4 do
              if redis.call('XACK', KEYS[1], ARGV[1], ARGV[i]) == 1 then
                redis.call('XDEL', KEYS[1], ARGV[i])
                if ARGV[i + 1] ~= '' then redis.call('DECR', ARGV[i + 1]) end
                if ARGV[i + 2] ~= '' then
                  redis.call('RPUSH', ARGV[i + 2], ARGV[i + 3])
                  redis.call('EXPIRE', ARGV[i + 2], ARGV[2])
                end
                acknowledged = acknowledged + 1
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

    /// Moves an entry into the delayed-retry set (its fields msgpack'd, scored by the
    /// due time) and acknowledges and deletes it, unless it was acknowledged already.
    ///
    /// KEYS: 1 stream, 2 retry set. ARGV: 1 group, 2 entry id, 3 delay ms, 4… fields.
    static let scheduleRetry = RedisScript(
        source: """
            if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
            local t = redis.call('TIME')
            local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            local fields = {}
            for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
            redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), cmsgpack.pack(fields))
            redis.call('XDEL', KEYS[1], ARGV[2])
            return 1
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
    /// deletes it, and (for a readable message) releases its quota reservation and
    /// answers its reply list, all unless it was acknowledged already.
    ///
    /// KEYS: 1 stream, 2 dead-letter stream, 3 quota key, 4 reply key (each of the
    /// last two the stream itself when there is none). ARGV: 1 group, 2 entry id,
    /// 3 reason, 4 `1` to release quota, 5 `1` to reply, 6 reply JSON, 7 reply TTL s, 8… fields.
    static let deadLetter = RedisScript(
        source: """
            if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
            local t = redis.call('TIME')
            local fields = {}
            for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
            fields[#fields + 1] = 'dead_reason'
            fields[#fields + 1] = ARGV[3]
            fields[#fields + 1] = 'dead_at'
            fields[#fields + 1] = t[1]
            redis.call('XADD', KEYS[2], 'MAXLEN', '~', 100000, '*', unpack(fields))
            redis.call('XDEL', KEYS[1], ARGV[2])
            if ARGV[4] == '1' then redis.call('DECR', KEYS[3]) end
            if ARGV[5] == '1' then
              redis.call('RPUSH', KEYS[4], ARGV[6])
              redis.call('EXPIRE', KEYS[4], ARGV[7])
            end
            return 1
            """)
}
