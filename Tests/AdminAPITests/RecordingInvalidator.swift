import Foundation
import Synchronization

@testable import IngressService

/// Records which caches the admin API invalidated (the Redis invalidation itself is
/// the ingress's, tested there).
final class RecordingInvalidator: CacheInvalidator {
    private let storage = Mutex<[String]>([])

    var events: [String] { storage.withLock { $0 } }

    private func add(_ event: String) { storage.withLock { $0.append(event) } }

    func accountChanged(_ accountID: String) async throws { add("account \(accountID)") }
    func appChanged(_ appID: String, topics: [String]) async throws {
        add("app \(appID) \(topics.joined(separator: ","))")
    }
    func subscriptionsDeleted(_ subscriptionIDs: [String]) async throws {
        add("deleted \(subscriptionIDs.sorted().joined(separator: ","))")
    }
    func subscriptionsChanged(_ subscriptionIDs: [String]) async throws {
        add("changed \(subscriptionIDs.sorted().joined(separator: ","))")
    }
    func credentialChanged(_ credentialID: String) async throws { add("credential \(credentialID)") }
    func userChanged(_ userID: String, appID: String?) async throws { add("user \(userID) \(appID ?? "-")") }
    func apiKeyRevoked(keyHash: [UInt8]) async throws { add("key \(keyHash.count)") }
}
