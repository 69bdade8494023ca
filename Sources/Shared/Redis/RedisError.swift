/// Everything the Redis client throws.
///
/// `description` is safe to log: it never contains the password, a key, a value or
/// any other command argument. The server's own error text may quote arguments
/// (`ERR unknown command 'x', with args beginning with: …`), so it is kept apart in
/// `serverMessage` and only its leading part, up to the first quote, is described.
public struct RedisError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: Sendable, Equatable {
        /// Could not connect, or the connection broke (refused, reset, closed by the server).
        /// A command that fails this way may or may not have run on the server.
        case connection
        /// The server did not answer within the connect or command timeout; the
        /// connection is discarded. The command may or may not have run.
        case timeout
        /// The server sent something that is not RESP.
        case `protocol`
        /// AUTH was refused, or the server wants a password that was not given.
        case authentication
        /// SELECT of the database named in the URL was refused (e.g. out of range).
        case database
        /// The server answered the command with an error reply; the payload is the
        /// reply's first word, e.g. `ERR`, `WRONGTYPE`, `NOSCRIPT`, `BUSY`.
        case server(String)
        /// The reply does not have the shape the caller asked for.
        case unexpectedReply
        /// `REDIS_URL` cannot be used.
        case invalidURL
        /// The connection was closed by its owner.
        case closed
    }

    public let code: Code
    /// What went wrong, without secrets or command arguments.
    public let message: String
    /// The command's name (`GET`, `EVALSHA`…), never its arguments.
    public let command: String?
    /// The server's full error text for `.server`, `.authentication` and `.database`.
    /// It may quote command arguments: do not log it.
    public let serverMessage: String?
    /// The command was written and then the connection failed or timed out before its
    /// reply: it may have run on the server (or not). False when it cannot have run:
    /// the connection could not be made, or failed before the command was sent.
    public let mayHaveRun: Bool

    public init(
        code: Code, message: String, command: String? = nil, serverMessage: String? = nil, mayHaveRun: Bool = false
    ) {
        self.code = code
        self.message = message
        self.command = command
        self.serverMessage = serverMessage
        self.mayHaveRun = mayHaveRun
    }

    /// An error reply from the server, e.g. `WRONGTYPE Operation against a key…`.
    init(serverReply text: String, command: String?) {
        let prefix = text.prefix(while: { !$0.isWhitespace })
        self.init(
            code: .server(prefix.isEmpty ? "ERR" : String(prefix)), message: Self.safeLeadingPart(of: text),
            command: command, serverMessage: text)
    }

    /// The first word of the server's error reply, for `.server`, `.authentication` and `.database`.
    public var serverPrefix: String? {
        if case .server(let prefix) = code { return prefix }
        return serverMessage.map { String($0.prefix(while: { !$0.isWhitespace })) }
    }

    public var description: String {
        var text = "redis \(Self.name(of: code)) error"
        if let command { text += " (\(command))" }
        return text + ": " + message
    }

    static func name(of code: Code) -> String {
        switch code {
        case .connection: "connection"
        case .timeout: "timeout"
        case .protocol: "protocol"
        case .authentication: "authentication"
        case .database: "database"
        case .server(let prefix): "server \(prefix)"
        case .unexpectedReply: "unexpected reply"
        case .invalidURL: "URL"
        case .closed: "closed"
        }
    }

    /// The server's text up to its first quote (where Redis starts echoing
    /// arguments), at most 160 characters.
    static func safeLeadingPart(of text: String) -> String {
        let cut = text.prefix(while: { $0 != "'" && $0 != "\"" && $0 != "\r" && $0 != "\n" }).prefix(160)
        let trimmed = cut.trimmingTrailingSpacesAndPunctuation()
        return trimmed.count < text.count ? trimmed + " …" : trimmed
    }
}

extension Substring {
    fileprivate func trimmingTrailingSpacesAndPunctuation() -> String {
        var end = endIndex
        while end > startIndex {
            let previous = index(before: end)
            guard self[previous] == " " || self[previous] == "," || self[previous] == ":" else { break }
            end = previous
        }
        return String(self[startIndex..<end])
    }
}
