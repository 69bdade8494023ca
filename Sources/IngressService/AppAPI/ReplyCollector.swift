import Foundation
import Shared

/// Waits on one request's reply list (`RedisKeys.reply`) for the workers'
/// `{"mid","status","reason"}` objects until every expected message id has
/// answered, the deadline passes, or the ingress starts stopping (`stopping`: the
/// send then answers `queued` for what it still waits on within a second, inside the
/// server's drain, where the drain's end would have cut it off with a 503 that hides
/// what was queued). Blocks in short `BLPOP`s so the pooled connection's command
/// timeout is never reached.
struct ReplyCollector: Sendable {
    let redis: RedisClient
    let stopping: StopFlag

    struct Reply: Sendable {
        let status: String
        let reason: String
    }

    func collect(from key: String, expecting ids: Set<String>, deadline: ContinuousClock.Instant) async
        -> [String: Reply]
    {
        var replies: [String: Reply] = [:]
        while replies.count < ids.count {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero, !stopping.isSet else { break }
            let seconds = min(remaining.inSeconds, 1)
            let wait = String(format: "%.3f", max(seconds, 0.01))
            // A failed wait ends the collection with what it has (and what the list holds).
            guard let reply = try? await redis.send(RedisCommand("BLPOP", key, wait), timeout: .seconds(3)) else {
                break
            }
            if let json = reply.array?.last?.bytes { take(json, into: &replies, expecting: ids) }
        }
        // Stopped early (the deadline, the ingress stopping, a failed wait): outcomes
        // already in the list still count, rather than being reported `queued`.
        if replies.count < ids.count, let waiting = try? await redis.send("LRANGE", key, 0, -1).array {
            for item in waiting { if let json = item.bytes { take(json, into: &replies, expecting: ids) } }
        }
        _ = try? await redis.send("DEL", key)
        return replies
    }

    /// Adds the outcome in `json` (`{"mid","status","reason"}`) if it is one expected.
    private func take(_ json: [UInt8], into replies: inout [String: Reply], expecting ids: Set<String>) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
            let mid = object["mid"] as? String, ids.contains(mid), let status = object["status"] as? String
        else { return }
        replies[mid] = Reply(status: status, reason: object["reason"] as? String ?? "")
    }
}
