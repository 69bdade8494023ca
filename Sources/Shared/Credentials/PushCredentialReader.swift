/// Reads a push credential from Postgres and opens its sealed key (the worker's
/// "which key signs for this app"). Errors never carry key material.
public struct PushCredentialReader: Sendable {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public enum Code: Sendable, Equatable {
            /// No credential with that id (deleted, or never existed).
            case notFound
            /// The sealed key does not open with this `CREDENTIAL_KEY` (or was tampered with).
            case cannotOpen
        }

        public let code: Code
        public let credentialID: String

        public var description: String {
            switch code {
            case .notFound: "push credential \(credentialID) not found"
            case .cannotOpen: "push credential \(credentialID) does not open with CREDENTIAL_KEY"
            }
        }
    }

    public let postgres: PostgresClient
    private let sealer: PushCredentialSealer

    public init(postgres: PostgresClient, sealer: PushCredentialSealer) {
        self.postgres = postgres
        self.sealer = sealer
    }

    /// The credential `id` with its key opened. Throws `Failure` or a `PostgresError`.
    public func credential(id: String) async throws -> StoredPushCredential {
        let rows = try await postgres.query(
            .prepared(
                "push_credential_by_id",
                """
                SELECT id, account_id, team_id, key_id, sealed_key, status, rejected_at, rejected_reason
                FROM push_credentials WHERE id = \(id)
                """))
        guard let row = rows.first else { throw Failure(code: .notFound, credentialID: id) }
        let sealed = try row.decode("sealed_key", as: [UInt8].self)
        let key: P256PrivateKey
        do {
            key = try sealer.open(sealed, credentialID: id)
        } catch {
            throw Failure(code: .cannotOpen, credentialID: id)
        }
        return StoredPushCredential(
            id: id, accountID: try row.decode("account_id"), teamID: try row.decode("team_id"),
            keyID: try row.decode("key_id"),
            status: StoredPushCredential.Status(rawValue: try row.decode("status", as: String.self)) ?? .rejected,
            rejectedAt: try row.decode("rejected_at"), rejectedReason: try row.decode("rejected_reason"),
            privateKey: key)
    }
}
