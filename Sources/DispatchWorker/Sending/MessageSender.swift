import Shared

/// Sends one message through the APNs client with its app's credential and says
/// what happened. Nothing is logged per successful send.
final class MessageSender: Sendable {
    let apns: APNsClient
    let credentials: CredentialCache
    let metrics: WorkerMetrics
    /// `APNS_PRODUCTION_URL` and `APNS_SANDBOX_URL`, parsed once.
    let production: APNsEnvironment
    let sandbox: APNsEnvironment

    init(apns: APNsClient, credentials: CredentialCache, configuration: CommonConfiguration, metrics: WorkerMetrics) {
        self.apns = apns
        self.credentials = credentials
        self.metrics = metrics
        production = configuration.apnsProduction
        sandbox = configuration.apnsSandbox
    }

    /// Reads the message's fields through the shared `delivery` rather than copying it.
    func send(_ delivery: Delivery) async -> DeliveryOutcome {
        let credential: APNsCredential
        switch await credentials.lookup(delivery.message.credentialID) {
        case .usable(let usable): credential = usable
        case .missing: return .failed(.credentialMissing, detail: "credential_missing")
        case .rejected: return .failed(.credentialRejected, detail: "credential_rejected")
        case .unavailable: return .retry(cause: "database", countsAgainstCircuit: false)
        }
        let notification = NotificationBuilder.notification(for: delivery.message)
        let environment = delivery.message.sandbox ? sandbox : production
        let start = ContinuousClock.now
        do {
            let response = try await apns.send(notification, credential: credential, environment: environment)
            metrics.apnsLatencySeries.observe(since: start)
            return DeliveryOutcome.classify(response)
        } catch let error as APNsClientError {
            return DeliveryOutcome.classify(error)
        } catch {
            return .retry(cause: "unknown", countsAgainstCircuit: true)
        }
    }
}
