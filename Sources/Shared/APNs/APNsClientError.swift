/// Why a request got no answer from APNs. (An answer, even an error status, is an
/// `APNsResponse`.) `description` names what failed but never includes device
/// tokens, provider tokens or payloads.
public struct APNsClientError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Equatable, CustomStringConvertible {
        /// No answer within the request timeout (waiting in the queue included).
        case timeout
        /// The pool's request queue is full; nothing was sent. Retry later.
        case overloaded
        /// No connection could be made, or it was lost with the request in flight
        /// (which then may or may not have been delivered).
        case connection
        /// The server's certificate did not verify (unknown CA, wrong host name),
        /// or it did not agree to HTTP/2.
        case untrustedServer
        /// The client is shutting down and takes no more requests.
        case shutdown
        /// The notification cannot be sent as given (e.g. a device token that is not hex).
        case invalidRequest
        /// No provider token could be signed: the credential's key is unusable.
        case providerToken
        /// The shared provider-token store could not be read or written (Redis
        /// unreachable, or a signer that never published); nothing was sent. Retry later.
        case providerTokenStore
        /// The server's answer could not be understood.
        case protocolError

        public var description: String {
            switch self {
            case .timeout: "timeout"
            case .overloaded: "overloaded"
            case .connection: "connection"
            case .untrustedServer: "untrusted server"
            case .shutdown: "shutdown"
            case .invalidRequest: "invalid request"
            case .providerToken: "provider token"
            case .providerTokenStore: "provider token store"
            case .protocolError: "protocol error"
            }
        }
    }

    public let code: Code
    public let message: String
    /// What caused it (a `TLSError`, `HTTP2Error`, `RedisError`…), when there is one.
    public let underlying: (any Error)?

    public init(_ code: Code, _ message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String {
        var text = "APNs \(code): \(message)"
        if let underlying { text += " (\(Self.describe(underlying)))" }
        return text
    }

    /// Underlying errors from our own transport types are known not to carry
    /// secrets; anything else is named by its type only.
    private static func describe(_ error: any Error) -> String {
        switch error {
        case let error as TLSError: error.description
        case let error as HTTP2Error: error.description
        case let error as APNsClientError: error.description
        default: String(describing: type(of: error))
        }
    }
}
