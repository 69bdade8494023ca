import Foundation

/// `PATCH /apps/:id/push`: any of the app's push settings; absent fields keep their
/// value, `"credentialId": null` detaches the credential.
struct PushSettingsRequest: Decodable {
    var enabled: Bool?
    /// nil: unchanged; `.some(nil)`: none.
    var credentialId: String??
    /// The complete list (replaces the current one): an array of ids, or one string
    /// with an id per line (the console's text, where blank lines are skipped).
    var bundleIds: [String]?

    enum CodingKeys: String, CodingKey { case enabled, credentialId, bundleIds }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        enabled = try container.decodeIfPresent(Bool.self, forKey: .enabled)
        if container.contains(.credentialId) {
            credentialId = .some(
                try container.decodeNil(forKey: .credentialId)
                    ? nil : try container.decode(String.self, forKey: .credentialId))
        }
        if let text = try? container.decodeIfPresent(String.self, forKey: .bundleIds) {
            bundleIds = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
                .filter { !$0.isEmpty }
        } else {
            bundleIds = try container.decodeIfPresent([String].self, forKey: .bundleIds)
        }
    }
}
