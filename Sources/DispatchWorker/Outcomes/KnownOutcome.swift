import Foundation
import Shared

/// APNs's answer carried by a retried message whose outcome could not be written
/// (`QueueMessage.knownOutcome`): while Postgres is out of reach, a gone device's
/// subscription cannot be deleted, nor a refused credential flagged, and the message
/// is retried for that. Its next turn writes the answer it already has instead of
/// asking APNs again, which would only repeat it (to a dead token, or with a refused
/// provider token, every few seconds for as long as the outage lasts).
///
/// The text: `gone <reason> <Apple's timestamp in ms, or ->` or
/// `credential_rejected <reason>`. Unknown text (a newer worker's) is sent as usual.
enum KnownOutcome {
    static func text(of outcome: DeliveryOutcome) -> String? {
        switch outcome {
        case .gone(let timestamp, let reason):
            let milliseconds = timestamp.map { String(Int64(($0.timeIntervalSince1970 * 1000).rounded())) } ?? "-"
            return "gone \(reason) \(milliseconds)"
        case .credentialRejected(let reason):
            return "credential_rejected \(reason)"
        default:
            return nil
        }
    }

    static func outcome(of text: String) -> DeliveryOutcome? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        switch (parts.first, parts.count) {
        case ("gone", 3) where !parts[1].isEmpty:
            let timestamp = Int64(parts[2]).map { Date(timeIntervalSince1970: Double($0) / 1000) }
            guard timestamp != nil || parts[2] == "-" else { return nil }
            return .gone(timestamp: timestamp, reason: parts[1])
        case ("credential_rejected", 2) where !parts[1].isEmpty:
            return .credentialRejected(reason: parts[1])
        default:
            return nil
        }
    }
}
