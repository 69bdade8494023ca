import Shared

/// Everything a request is judged against, as one immutable value: teams' keys,
/// who owns which bundle id, and what the control API changed (revoked keys,
/// uninstalled or topic-bound device tokens). `SimulatorState` holds the current
/// one; a connection takes a copy per request (dictionaries are copy-on-write, so
/// that costs a few retains), and validation then runs without any lock.
struct SimulatorRules: Sendable {
    struct Key: Sendable {
        let teamID: String
        let publicKey: P256PublicKey
        var isRevoked = false
    }

    /// By key id (`kid`).
    var keys: [String: Key] = [:]
    /// Bundle id → the team allowed to push to it.
    var bundleOwners: [String: String] = [:]
    /// Lower-case device token → the only topic it accepts (DeviceTokenNotForTopic otherwise).
    var deviceTopics: [String: String] = [:]
    /// Lower-case device token → when it became invalid (ms since 1970): 410 Unregistered.
    var uninstalled: [String: Int64] = [:]
    /// Lower-case device token → the lower-case host (its APNs environment, as the
    /// request's `:authority` names it) whose token it is: through another, 400
    /// BadDeviceToken, as Apple answers a token of the other environment.
    var deviceHosts: [String: String] = [:]
    var tokenUpdatePeriodSeconds: Int64
    var tokenLifetimeSeconds: Int64
    /// Bumped whenever keys change, so connections re-verify the token they cached.
    var keyGeneration: UInt64 = 0

    init(tokenUpdatePeriodSeconds: Int64 = 20 * 60, tokenLifetimeSeconds: Int64 = 60 * 60) {
        self.tokenUpdatePeriodSeconds = tokenUpdatePeriodSeconds
        self.tokenLifetimeSeconds = tokenLifetimeSeconds
    }

    init(configuration: SimulatorConfiguration) {
        self.init(
            tokenUpdatePeriodSeconds: configuration.tokenUpdatePeriodSeconds,
            tokenLifetimeSeconds: configuration.tokenLifetimeSeconds)
        for (teamID, team) in configuration.teams {
            for (keyID, publicKey) in team.keys { keys[keyID] = Key(teamID: teamID, publicKey: publicKey) }
            for bundleID in team.bundleIDs { bundleOwners[bundleID] = teamID }
        }
    }

    mutating func setKey(_ keyID: String, teamID: String, publicKey: P256PublicKey) {
        keys[keyID] = Key(teamID: teamID, publicKey: publicKey)
        keyGeneration &+= 1
    }

    /// Returns false for an unknown key.
    mutating func revokeKey(_ keyID: String) -> Bool {
        guard keys[keyID] != nil else { return false }
        keys[keyID]?.isRevoked = true
        keyGeneration &+= 1
        return true
    }
}
