import Foundation
import Shared

extension AdminAPI {
    /// The admin API's own HTTP server on `ADMIN_LISTEN` (not started), or nil when
    /// `ADMIN_LISTEN` is unset and the admin API is off. Keys are sealed with
    /// `CREDENTIAL_KEY`; requests wait on storage while `liveness` finds Postgres
    /// answering; `probe` asks APNs production; `invalidator` drops the
    /// ingress's cached copies after each change; `quota` is the ingress's live count.
    static func makeServer(
        configuration: IngressConfiguration, postgres: PostgresClient, liveness: PostgresLiveness,
        probe: any CredentialProbe,
        invalidator: any CacheInvalidator, quota: any QuotaCounter, logger: Logger
    ) throws -> HTTPServer? {
        guard let address = configuration.adminListen, let token = configuration.adminToken else { return nil }
        let logger = logger.child("admin")
        let api = AdminAPI(
            token: token, postgres: postgres, liveness: liveness,
            sealer: try PushCredentialSealer(configuration: configuration.common),
            probe: probe, invalidator: invalidator, quota: quota, logger: logger,
            invalidationRetryWindow: .seconds(configuration.cacheLifetimeSeconds))
        return HTTPServer(
            configuration: HTTPServer.Configuration(address: address, connectionLimit: 256),
            handler: api, logger: logger)
    }
}
