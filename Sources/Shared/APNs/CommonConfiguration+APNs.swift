extension CommonConfiguration {
    /// `APNS_PRODUCTION_URL` as an environment (Apple's production host by default).
    public var apnsProduction: APNsEnvironment {
        APNsEnvironment(name: "production", baseURL: apnsProductionURL) ?? .production
    }

    /// `APNS_SANDBOX_URL` as an environment (Apple's sandbox host by default).
    public var apnsSandbox: APNsEnvironment {
        APNsEnvironment(name: "sandbox", baseURL: apnsSandboxURL) ?? .sandbox
    }

    /// The production or sandbox environment, as a subscription's `sandbox` flag picks.
    public func apnsEnvironment(sandbox: Bool) -> APNsEnvironment { sandbox ? apnsSandbox : apnsProduction }
}
