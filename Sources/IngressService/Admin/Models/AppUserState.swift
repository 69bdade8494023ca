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
