import Foundation
import Shared

extension AdminAPI {
    /// The admin API of the ingress: probes credentials against `APNS_PRODUCTION_URL`,
    /// seals keys with `CREDENTIAL_KEY`, invalidates the ingress's caches through
    /// `invalidator`. Nil when `ADMIN_LISTEN` is unset (the admin API is off).
    static func make(
        configuration: IngressConfiguration, postgres: PostgresClient, probe: any CredentialProbe,
        invalidator: any CacheInvalidator, logger: Logger
    ) throws -> AdminAPI? {
        guard configuration.adminListen != nil, let token = configuration.adminToken else { return nil }
        return AdminAPI(
            token: token, postgres: postgres, sealer: try PushCredentialSealer(configuration: configuration.common),
            probe: probe, invalidator: invalidator, logger: logger.child("admin"))
    }

    /// Starts the admin API's own HTTP listener on `ADMIN_LISTEN`; nil when it is off.
    static func startServer(
        configuration: IngressConfiguration, postgres: PostgresClient, probe: any CredentialProbe,
        invalidator: any CacheInvalidator, logger: Logger
    ) throws -> HTTPServer? {
        guard let address = configuration.adminListen,
            let api = try make(
                configuration: configuration, postgres: postgres, probe: probe, invalidator: invalidator, logger: logger)
        else { return nil }
        let server = HTTPServer(
            configuration: HTTPServer.Configuration(address: address, threads: 1, connectionLimit: 256),
            handler: api, logger: logger.child("admin"))
        try server.start()
        return server
    }
}
