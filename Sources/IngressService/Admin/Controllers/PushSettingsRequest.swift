/// `PATCH /apps/:id/push`: any of the app's push settings; absent fields keep their
/// value, `"credentialId": null` detaches the credential.
struct PushSettingsRequest: Decodable {
    var enabled: Bool?
    /// nil: unchanged; `.some(nil)`: none.
    var credentialId: String??
    /// The complete list (replaces the current one): an array, or one string with an id per line.
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
        // An array of ids, or the console's text: one per line.
        if let text = try? container.decodeIfPresent(String.self, forKey: .bundleIds) {
            bundleIds = [text]
        } else {
            bundleIds = try container.decodeIfPresent([String].self, forKey: .bundleIds)
        }
    }
}
