extension APNsClient {
    /// How the client connects and how long it waits.
    public struct Configuration: Sendable {
        /// HTTP/2 connections per (credential, environment) pool (`APNS_CONNECTIONS`).
        public var connectionsPerPool: Int
        /// Requests that may wait per pool for a free stream; beyond it `send` fails with `overloaded`.
        public var queueCapacity: Int
        /// From `send` to the answer, waiting in the queue included.
        public var requestTimeout: Duration
        /// DNS, TCP and TLS handshake of a new connection.
        public var connectTimeout: Duration
        /// A PING is sent when nothing was heard for this long.
        public var idlePingInterval: Duration
        /// A PING is sent when requests are in flight and nothing was heard for this long.
        public var busyPingInterval: Duration
        /// No PING acknowledgement within this closes the connection (it is replaced).
        public var pingTimeout: Duration
        /// Delays between attempts after a connection fails.
        public var backoff: ReconnectBackoff
        /// Our own cap on streams per connection, below the peer's limit.
        public var maxStreamsPerConnection: Int
        /// How often one request is sent again after GOAWAY or REFUSED_STREAM.
        public var maxRetries: Int
        /// Extra CA bundle to trust besides the system's (`APNS_CA_FILE`).
        public var caFile: String?
        /// How often timeouts and connection health are checked.
        public var tickInterval: Duration

        public init(
            connectionsPerPool: Int = 4, queueCapacity: Int = 10_000, requestTimeout: Duration = .seconds(15),
            connectTimeout: Duration = .seconds(10), idlePingInterval: Duration = .seconds(60),
            busyPingInterval: Duration = .seconds(5), pingTimeout: Duration = .seconds(10),
            backoff: ReconnectBackoff = ReconnectBackoff(),
            maxStreamsPerConnection: Int = 1000, maxRetries: Int = 5, caFile: String? = nil,
            tickInterval: Duration = .milliseconds(50)
        ) {
            precondition(
                connectionsPerPool >= 1 && queueCapacity >= 0 && maxStreamsPerConnection >= 1 && maxRetries >= 0)
            self.connectionsPerPool = connectionsPerPool
            self.queueCapacity = queueCapacity
            self.requestTimeout = requestTimeout
            self.connectTimeout = connectTimeout
            self.idlePingInterval = idlePingInterval
            self.busyPingInterval = busyPingInterval
            self.pingTimeout = pingTimeout
            self.backoff = backoff
            self.maxStreamsPerConnection = maxStreamsPerConnection
            self.maxRetries = maxRetries
            self.caFile = caFile
            self.tickInterval = tickInterval
        }

        /// The worker's settings: `APNS_CONNECTIONS` and `APNS_CA_FILE`, defaults otherwise.
        public init(worker: WorkerConfiguration) {
            self.init(connectionsPerPool: worker.apnsConnections, caFile: worker.common.apnsCAFile)
        }
    }

    /// What happened so far, for `/metrics` and tests.
    public struct Metrics: Sendable, Equatable {
        public var connectionsOpened: Int
        public var connectionsClosed: Int
        /// Connections that closed (or never opened) without ever answering.
        public var connectionFailures: Int
        public var pingTimeouts: Int
        public var retriedAfterGoAway: Int
        public var retriedAfterRefusal: Int
        public var overloaded: Int
        public var timeouts: Int
        /// `ExpiredProviderToken` answers that got a new token and were retried.
        public var providerTokenRefreshes: Int
    }
}
