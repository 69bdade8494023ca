import Shared

/// Stands in until the APNs client is linked into the ingress: every probe fails,
/// so credentials and new bundle ids are refused with 502 rather than saved unchecked.
// TODO(admin): replace with APNsCredentialProbe once Sources/Shared/APNs is on main.
struct UnavailableCredentialProbe: CredentialProbe {
    func probe(teamID: String, keyID: String, privateKey: P256PrivateKey, topic: String)
        async throws(CredentialProbeError) -> CredentialProbeResult
    {
        throw CredentialProbeError(message: "the APNs client is not available in this build")
    }
}
