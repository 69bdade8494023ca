import Foundation
import Shared

/// What one send attempt (or the checks before it) decided for a message.
enum DeliveryOutcome: Sendable, Equatable {
    /// APNs answered 200.
    case sent
    /// 410 Unregistered / 400 BadDeviceToken: the token died (Apple's timestamp when given).
    case gone(timestamp: Date?, reason: String)
    /// 403 InvalidProviderToken (after the client's one token refresh): the credential was refused.
    case credentialRejected(reason: String)
    /// A failure that is final for this message.
    case failed(FailureReason, detail: String)
    /// Worth another attempt later; `countsAgainstCircuit` when it is not the message's
    /// fault (connection, timeout, 5xx), so a run of them raises the circuit flag.
    case retry(cause: String, countsAgainstCircuit: Bool)
    /// Not tried: something of ours it needs (its credential, from Postgres, or its
    /// provider token, from Redis) cannot be read. Looked at again later, until the
    /// message expires, without using one of its APNs attempts: an outage of our own
    /// must not fail what Apple never saw. `atLeastMilliseconds`: the earliest look
    /// worth making (a busy destination's average answer time; 0 for the usual wait).
    case postponed(cause: String, atLeastMilliseconds: Int = 0)
    /// The client is shutting down before the send finished: another worker sends it
    /// (it goes back through the delayed-retry set).
    case abandoned
    /// Not sent again: its subscription was deleted after it was accepted
    /// (`RetriedSubscriptionCheck`).
    case subscriptionDeleted
    /// Not sent again: its app's push was switched off (or its owner's plan lost push)
    /// after it was accepted (`RetriedSubscriptionCheck`).
    case pushDisabled
    /// Not sent: a newer message of its Web Push `Topic` was queued, which replaces it
    /// (RFC 8030 §5.4; `TopicSupersession`).
    case replaced

    /// The spec's `failed` reasons, plus `expired` for a TTL that passed unsent.
    enum FailureReason: String, Sendable {
        case credentialMissing = "credential_missing"
        case credentialRejected = "credential_rejected"
        case providerError = "provider_error"
        case expired

        /// The reason an App API sender is told: one of the spec's three, so a message
        /// that expired unsent (our outage outlasted it) is a `provider_error`.
        var replyReason: String { self == .expired ? FailureReason.providerError.rawValue : rawValue }
    }

    /// The outcome of APNs's answer.
    static func classify(_ response: APNsResponse) -> DeliveryOutcome {
        if response.status == 200 { return .sent }
        let name = response.reason.map(metricName) ?? "HTTP\(response.status)"
        switch response.reason {
        case .unregistered(let timestamp): return .gone(timestamp: timestamp, reason: name)
        case .badDeviceToken: return .gone(timestamp: nil, reason: name)
        case .expiredToken: return .gone(timestamp: nil, reason: name)
        case .invalidProviderToken, .forbidden, .unrelatedKeyIdInToken:
            return .credentialRejected(reason: name)
        case .badEnvironmentKeyInToken:
            // A key limited to the other environment (Apple allows sandbox-only and
            // production-only keys): this device's environment is refused, the key is
            // not, so the credential is not flagged and its other sends go on.
            return .failed(.credentialRejected, detail: name)
        case .tooManyRequests, .tooManyProviderTokenUpdates, .expiredProviderToken, .idleTimeout:
            return .retry(cause: name, countsAgainstCircuit: false)
        case .internalServerError, .serviceUnavailable, .shutdown:
            return .retry(cause: name, countsAgainstCircuit: true)
        default:
            if response.status == 429 { return .retry(cause: name, countsAgainstCircuit: false) }
            if response.status >= 500 { return .retry(cause: name, countsAgainstCircuit: true) }
            return .failed(.providerError, detail: name)
        }
    }

    /// The outcome of a send that got no answer.
    static func classify(_ error: APNsClientError) -> DeliveryOutcome {
        switch error.code {
        case .shutdown: .abandoned
        case .invalidRequest: .failed(.providerError, detail: "InvalidRequest")
        case .providerToken: .failed(.credentialMissing, detail: "ProviderToken")
        case .providerTokenStore: .postponed(cause: "provider_token_store")
        case .overloaded: .retry(cause: "overloaded", countsAgainstCircuit: false)
        case .timeout: .retry(cause: "timeout", countsAgainstCircuit: true)
        case .connection: .retry(cause: "connection", countsAgainstCircuit: true)
        case .untrustedServer: .retry(cause: "untrusted_server", countsAgainstCircuit: true)
        case .protocolError: .retry(cause: "protocol_error", countsAgainstCircuit: true)
        }
    }

    /// A bounded label value for a reason (Apple may add reasons; those are `Unknown`).
    static func metricName(_ reason: APNsReason) -> String {
        if case .unknown = reason { return "Unknown" }
        return reason.name
    }
}
