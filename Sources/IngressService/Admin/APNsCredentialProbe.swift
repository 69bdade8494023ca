import Foundation
import Shared

/// Probes a credential against APNs (production, `APNS_PRODUCTION_URL`) with the APNs
/// client: one silent notification to a dummy device token (64 zeros, no device's),
/// signed with the credential's own provider token. A valid credential and topic get
/// 400 BadDeviceToken (or 410) and nothing reaches any device. The token is well
/// formed, so whatever order Apple checks in (it does not document one), a malformed
/// token cannot be refused before the topic is judged.
///
/// Each probe uses its own short-lived client (own token store and connection), so a
/// probed key never lands in the worker's pools or token cache.
struct APNsCredentialProbe: CredentialProbe {
    static let dummyDeviceToken = String(repeating: "0", count: 64)
    static let payload = Array(#"{"aps":{"content-available":1}}"#.utf8)

    let environment: APNsEnvironment
    let configuration: APNsClient.Configuration
    let logger: Logger

    init(environment: APNsEnvironment, caFile: String?, logger: Logger, requestTimeout: Duration = .seconds(10)) {
        self.environment = environment
        configuration = APNsClient.Configuration(
            connectionsPerPool: 1, queueCapacity: 16, requestTimeout: requestTimeout, connectTimeout: .seconds(5),
            maxRetries: 1, caFile: caFile)
        self.logger = logger
    }

    /// APNs production as the service is configured (`APNS_PRODUCTION_URL`, `APNS_CA_FILE`).
    init(configuration: CommonConfiguration, logger: Logger) {
        self.init(environment: configuration.apnsProduction, caFile: configuration.apnsCAFile, logger: logger)
    }

    func probe(teamID: String, keyID: String, privateKey: P256PrivateKey, topics: [String])
        async throws(CredentialProbeError) -> [CredentialProbeResult]
    {
        let client: APNsClient
        do {
            client = try APNsClient(configuration: configuration, tokens: InMemoryProviderTokenStore(), logger: logger)
        } catch {
            throw CredentialProbeError(message: "cannot set up the APNs client: \(error.message)")
        }
        let credential = APNsCredential(
            id: "probe-" + Base64URL.encode(SecureRandom.bytes(9)), teamID: teamID, keyID: keyID, privateKey: privateKey
        )
        // One after the other on the client's one connection, with its one token.
        var outcome: Result<[CredentialProbeResult], CredentialProbeError> = .success([])
        var results: [CredentialProbeResult] = []
        for topic in topics {
            let notification = APNsNotification(
                deviceToken: Self.dummyDeviceToken, topic: topic, pushType: .background, priority: .considerPower,
                payload: Self.payload)
            do {
                let response = try await client.send(notification, credential: credential, environment: environment)
                let reason = response.reason?.name
                guard let result = CredentialProbeResult.judge(status: response.status, reason: reason) else {
                    let answer = "\(environment.description) answered \(response.status) \(reason ?? "")"
                    outcome = .failure(CredentialProbeError(message: answer))
                    break
                }
                results.append(result)
                // A refused credential fails every topic alike: no need to ask again.
                if case .credentialRejected = result { break }
            } catch {
                let description = (error as? APNsClientError)?.description ?? "\(error)"
                outcome = .failure(CredentialProbeError(message: "\(environment.description): \(description)"))
                break
            }
        }
        await client.shutdown(deadline: .seconds(1))
        if case .failure(let error) = outcome { throw error }
        // Topics not asked after a refused credential share its answer.
        while results.count < topics.count, let last = results.last { results.append(last) }
        return results
    }
}
