/// Reads a subscription's pending stash: the ciphertexts younger than the stash
/// lifetime, oldest first (entries are `<accepted ms>:<ciphertext>`, or
/// `<accepted ms>;<Topic>:<ciphertext>` for a push with a Topic, which replaces the
/// stashed one of its topic; written by `HotPathScript` with the Redis server's clock).
public enum StashScript {
    public static let script = RedisScript(
        source: """
            local t = redis.call('TIME')
            local oldest = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) - tonumber(ARGV[1])
            local out = {}
            for _, item in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
              local colon = string.find(item, ':', 1, true)
              local acceptedAt = colon and tonumber(string.match(item, '^%d+'))
              if acceptedAt and acceptedAt > oldest then
                out[#out + 1] = string.sub(item, colon + 1)
              end
            end
            return out
            """)

    public static func command(subscriptionID: String, lifetimeMilliseconds: Int64, keys: RedisKeys) -> RedisCommand {
        .script(script, keys: [keys.stash(subscriptionID)], arguments: [lifetimeMilliseconds])
    }
}
