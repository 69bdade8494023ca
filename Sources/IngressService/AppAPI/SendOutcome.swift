import Shared

/// One message's answer in `POST /send`: `{subscriptionId, status, reason}`; `reason`
/// is empty unless `status` is `failed` (README's contract), so clients can switch on it.
struct SendOutcome: Sendable, Equatable {
    let subscriptionID: String
    var status: String
    var reason: String

    init(_ subscriptionID: String, _ status: String, reason: String = "") {
        self.subscriptionID = subscriptionID
        self.status = status
        self.reason = reason
    }

    var json: String {
        "{\"subscriptionId\":\(JSONString.quote(subscriptionID)),\"status\":\(JSONString.quote(status)),"
            + "\"reason\":\(JSONString.quote(reason))}"
    }
}
