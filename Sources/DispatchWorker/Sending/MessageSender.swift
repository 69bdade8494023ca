import Shared
import Synchronization

/// Sends messages through the APNs client with their app's credential and says
/// what happened to each. Nothing is logged per successful send.
final class MessageSender: Sendable {
    /// Reports one message's outcome; mostly called on the APNs client's loop
    /// thread, so it must be quick and must not block.
    typealias Completion = @Sendable (Delivery, DeliveryOutcome) -> Void

    let apns: APNsClient
    let credentials: CredentialCache
    let metrics: WorkerMetrics
    let destinations: DestinationSlots
    /// `APNS_PRODUCTION_URL` and `APNS_SANDBOX_URL`, parsed once.
    let production: APNsEnvironment
    let sandbox: APNsEnvironment

    init(
        apns: APNsClient, credentials: CredentialCache, configuration: CommonConfiguration, metrics: WorkerMetrics,
        destinations: DestinationSlots
    ) {
        self.apns = apns
        self.credentials = credentials
        self.metrics = metrics
        self.destinations = destinations
        production = configuration.apnsProduction
        sandbox = configuration.apnsSandbox
    }

    /// Sends `deliveries` and calls `completion` exactly once for each. Messages
    /// sharing a credential and environment (a read's entries mostly do) go to the
    /// client as one batch: one credential lookup, one token, one hand-over.
    /// Returns once every batch is handed over.
    func send(_ deliveries: [Delivery], completion: @escaping Completion) async {
        var remaining = deliveries
        while let first = remaining.first {
            var batch: [Delivery] = []
            var others: [Delivery] = []
            for delivery in remaining {
                if delivery.message.sandbox == first.message.sandbox
                    && delivery.message.hasSameCredential(as: first.message)
                {
                    batch.append(delivery)
                } else {
                    others.append(delivery)
                }
            }
            await send(batch: batch, completion: completion)
            remaining = others
        }
    }

    /// `batch` shares its first message's credential and environment.
    private func send(batch: [Delivery], completion: @escaping Completion) async {
        let message = batch[0].message
        let credential: APNsCredential
        let newest = batch.reduce(Int64.min) { max($0, $1.message.acceptedAt) }
        switch await credentials.lookup(message.credentialID, acceptedAt: newest) {
        case .usable(let usable): credential = usable
        case .missing: return report(batch, .failed(.credentialMissing, detail: "credential_missing"), completion)
        case .rejected: return report(batch, .failed(.credentialRejected, detail: "credential_rejected"), completion)
        case .unavailable: return report(batch, .postponed(cause: "database"), completion)
        case .unopenable: return report(batch, .postponed(cause: "credential_key"), completion)
        case .damaged:
            return report(batch, .failed(.credentialMissing, detail: "credential_unopenable"), completion)
        case .rechecking: return report(batch, .postponed(cause: "credential_recheck"), completion)
        }
        // What the destination has room for goes; the rest waits its turn in the retry set.
        let destination = DestinationSlots.key(credentialID: message.credentialID, sandbox: message.sandbox)
        let admitted = destinations.take(destination, upTo: batch.count)
        if admitted < batch.count {
            // Not back before a slot is likely to be free: a destination answering in
            // seconds would otherwise see its surplus cycle through Redis several times a second.
            let wait = destinations.answerTimeMilliseconds(destination)
            report(
                Array(batch[admitted...]), .postponed(cause: "destination_busy", atLeastMilliseconds: wait),
                completion)
            guard admitted > 0 else { return }
        }
        let batch = admitted < batch.count ? Array(batch[..<admitted]) : batch
        let destinations = destinations
        var omitted: Set<Int> = []
        let notifications = NotificationBuilder.notifications(for: batch, omittedCiphertexts: &omitted)
        let ciphertextOmitted = metrics.ciphertextOmitted
        let environment = message.sandbox ? sandbox : production
        let latency = metrics.apnsLatencySeries
        let start = ContinuousClock.now
        let pending = PendingDeliveries(batch)
        await apns.send(notifications, credential: credential, environment: environment) { [omitted] index, result in
            guard let delivery = pending.take(index) else { return }
            let elapsed = start.duration(to: .now)
            destinations.give(destination, elapsed: elapsed)
            switch result {
            case .success(let response):
                latency.observe(elapsed.inSeconds)
                let outcome = DeliveryOutcome.classify(response)
                // Counted as delivered, once: not per attempt.
                if outcome == .sent, omitted.contains(index) { ciphertextOmitted.increment() }
                completion(delivery, outcome)
            case .failure(let error):
                completion(delivery, DeliveryOutcome.classify(error))
            }
        }
    }

    private func report(_ batch: [Delivery], _ outcome: DeliveryOutcome, _ completion: Completion) {
        for delivery in batch { completion(delivery, outcome) }
    }
}

/// A batch's deliveries until each is answered: a delivery is let go as soon as its
/// answer arrives, so one slow request does not keep the whole batch in memory.
/// Answers come mostly from the APNs loop thread, a refreshed retry's from a task.
private final class PendingDeliveries: Sendable {
    private let deliveries: Mutex<[Delivery?]>

    init(_ batch: [Delivery]) {
        // Mapped, not converted: `[Delivery]` as `[Delivery?]` takes the runtime's generic cast, element by element.
        deliveries = Mutex(batch.map { Optional($0) })
    }

    /// The delivery at `index`, once.
    func take(_ index: Int) -> Delivery? {
        deliveries.withLock { deliveries in
            defer { deliveries[index] = nil }
            return deliveries[index]
        }
    }
}
