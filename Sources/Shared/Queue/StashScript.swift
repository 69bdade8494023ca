/// Reads a subscription's pending stash: the ciphertexts still within their
/// lifetime, oldest first (entries are `<start ms>:<ciphertext>`, written by
/// `HotPathScript` with the Redis server's clock; an entry ends at its start plus
/// the stash lifetime, the start moved back for a TTL shorter than that).
public enum StashScript {
    public static let script = RedisScript(
        source: """
            local t = redis.call('TIME')
            local oldest = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[1])
            local out = {}
            for _, item in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
              local colon = string.find(item, ':', 1, true)
              if colon and tonumber(string.sub(item, 1, colon - 1)) > oldest then
                out[#out + 1] = string.sub(item, colon + 1)
              end
            end
            return out
            """)

    public static func command(subscriptionID: String, lifetimeMilliseconds: Int64, keys: RedisKeys) -> RedisCommand {
        .script(script, keys: [keys.stash(subscriptionID)], arguments: [lifetimeMilliseconds])
    }
}
