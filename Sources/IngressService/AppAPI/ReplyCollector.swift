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

    func collect(from key: String, expecting ids: Set<String>, deadline: ContinuousClock.Instant) async throws
        -> [String: Reply]
    {
        var replies: [String: Reply] = [:]
        while replies.count < ids.count {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero, !stopping.isSet else { break }
            let seconds = min(Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18, 1)
            let wait = String(format: "%.3f", max(seconds, 0.01))
            let reply = try await redis.send(RedisCommand("BLPOP", key, wait), timeout: .seconds(3))
            guard let json = reply.array?.last?.bytes,
                let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
                let mid = object["mid"] as? String, ids.contains(mid), let status = object["status"] as? String
            else { continue }
            replies[mid] = Reply(status: status, reason: object["reason"] as? String ?? "")
        }
        _ = try? await redis.send("DEL", key)
        return replies
    }
}
