/// Where provider tokens come from: one token per credential, shared by every
/// connection (and, for the Redis store, every worker process).
public protocol ProviderTokenStore: Sendable {
    /// The current token for `credential`, signing one when there is none or it is old.
    func token(for credential: APNsCredential) async throws -> String

    /// A token to use after APNs refused `rejected`. Returns the rejected token itself
    /// when it may not be replaced yet (an expired one younger than the policy's
    /// minimum age); the caller then does not retry.
    func token(for credential: APNsCredential, replacing rejected: RejectedProviderToken) async throws -> String
}
