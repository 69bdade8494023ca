import Foundation
import Shared

/// `dispatch-worker replay-dead-letters`: puts the dead letters no worker could read
/// back on their queue streams, for the workers running now to send.
///
/// An entry of a format its worker did not know (a rolling upgrade that reached an
/// ingress before the workers) is dead-lettered as `unreadable: …` with all its
/// fields, its messages neither sent nor settled (their quota is still reserved, their
/// App API senders were never answered). Once workers that read it run, replaying it
/// sends them as if nothing had happened. Entries dead-lettered for other reasons
/// (handed out too often) already had their outcome reported, so they stay.
enum DeadLetterReplay {
    /// The command's name on the worker's command line.
    static let name = "replay-dead-letters"

    /// What one stream's replay did.
    struct Result: Equatable, Sendable {
        var replayed = 0
        /// Dead letters of other reasons, left where they are.
        var kept = 0
    }

    /// Replays the unreadable dead letters of each of `WORKER_STREAMS`; returns the exit
    /// status: 0 done, 1 failed, 2 configuration error.
    static func run(environment: Environment = Environment(), logger: Logger) async -> Int32 {
        let redisURL: String
        let streams: [String]
        do {
            redisURL = try environment.required("REDIS_URL")
            streams = try WorkerConfiguration.streams(in: environment)
        } catch {
            FileHandle.standardError.write(Data((error.description + "\n").utf8))
            return 2
        }
        let logger = logger.child("replay")
        do {
            let redis = try RedisClient(url: redisURL, options: .init(maximumConnections: 1))
            defer { redis.close() }
            for stream in streams {
                let result = try await replay(stream: stream, redis: redis)
                logger.notice(
                    "dead letters replayed",
                    metadata: ["stream": stream, "replayed": "\(result.replayed)", "kept": "\(result.kept)"])
            }
            return 0
        } catch {
            logger.error("replay failed", metadata: ["error": "\(error)"])
            return 1
        }
    }

    /// Moves `stream`'s unreadable dead letters back onto it, in order, up to the
    /// newest there when it starts (a letter that is still unreadable comes back to the
    /// dead-letter stream behind that, and is not taken again).
    static func replay(stream: String, redis: RedisClient, pageSize: Int = 100) async throws -> Result {
        let deadLetters = RedisKeys(stream: stream).deadLetters
        let newest = try await redis.send("XREVRANGE", deadLetters, "+", "-", "COUNT", 1).throwingError()
        guard let last = newest.array?.first?.array?.first?.string else { return Result() }
        var result = Result()
        var after = "-"
        while true {
            let reply = try await redis.run(
                moveUnreadable, keys: [deadLetters, stream], arguments: [after, last, pageSize]
            ).throwingError()
            guard let parts = reply.array, parts.count == 4, let replayed = parts[0].int, let kept = parts[1].int,
                let seen = parts[2].int
            else {
                throw RedisError(code: .unexpectedReply, message: "replay script answered an unexpected shape")
            }
            result.replayed += Int(replayed)
            result.kept += Int(kept)
            guard seen == Int64(pageSize), let next = parts[3].string else { return result }
            after = "(" + next
        }
    }

    /// KEYS: 1 dead-letter stream, 2 queue stream. ARGV: 1 start (exclusive `(id`, or
    /// `-`), 2 end id, 3 page size. Each dead letter whose `dead_reason` starts with
    /// `unreadable` goes back on the stream without its `dead_` fields and leaves the
    /// dead-letter stream. Returns {replayed, kept, seen, last id seen}.
    static let moveUnreadable = RedisScript(
        source: """
            local entries = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2], 'COUNT', tonumber(ARGV[3]))
            local replayed, kept, last = 0, 0, ''
            for _, entry in ipairs(entries) do
              last = entry[1]
              local fields, reason = {}, ''
              local values = entry[2]
              for i = 1, #values, 2 do
                if values[i] == 'dead_reason' then
                  reason = values[i + 1]
                elseif values[i] ~= 'dead_at' then
                  fields[#fields + 1] = values[i]
                  fields[#fields + 1] = values[i + 1]
                end
              end
              if string.sub(reason, 1, 10) == 'unreadable' and #fields > 0 then
                redis.call('XADD', KEYS[2], '*', unpack(fields))
                redis.call('XDEL', KEYS[1], entry[1])
                replayed = replayed + 1
              else
                kept = kept + 1
              end
            end
            return {replayed, kept, #entries, last}
            """)
}
