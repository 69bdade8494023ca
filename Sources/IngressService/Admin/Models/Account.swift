import Foundation
import Shared

/// An account as the admin API shows it.
struct Account: Sendable, Codable, Equatable {
    var id: String
    var name: String
    var plan: PlanName
    var createdAt: Date
    var updatedAt: Date
}
