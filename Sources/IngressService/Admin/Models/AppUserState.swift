import Foundation

/// One user's standing in one app.
struct AppUserState: Sendable, Codable, Equatable {
    var appId: String
    var userId: String
    /// The user authorized the app (required to bind subscriptions to the user).
    var authorized: Bool
    /// The user turned off this app's notifications.
    var unsubscribed: Bool
    /// The app's owner disabled the user in this app.
    var disabled: Bool
    var disabledReason: String?
}

extension AppUserState {
    /// Absent values are written as `null` (an explicit "none" for API clients), not left out.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(appId, forKey: .appId)
        try container.encode(userId, forKey: .userId)
        try container.encode(authorized, forKey: .authorized)
        try container.encode(unsubscribed, forKey: .unsubscribed)
        try container.encode(disabled, forKey: .disabled)
        try container.encode(disabledReason, forKey: .disabledReason)
    }
}
