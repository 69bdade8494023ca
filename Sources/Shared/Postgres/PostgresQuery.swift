import Foundation

/// A SQL statement and its parameters. Written as a string literal, every
/// interpolated value becomes a `$n` parameter, so values are bound and never
/// spliced into the SQL text:
///
///     let query: PostgresQuery = "SELECT id FROM subscriptions WHERE app_id = \(appID) AND user_id = \(userID)"
///
/// Only `identifier:` interpolations add text, and they are quoted as identifiers.
/// `.prepared(name, query)` runs the statement as a named prepared statement (hot paths):
///
///     try await client.query(.prepared("subscription_by_id", "SELECT … WHERE id = \(id)"))
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    public var sql: String
    public var binds: [PostgresData]
    /// When set, the statement is prepared once per connection under this name and reused.
    public var preparedName: String?

    public init(stringLiteral value: String) {
        sql = value
        binds = []
    }

    public init(stringInterpolation: StringInterpolation) {
        sql = stringInterpolation.sql
        binds = stringInterpolation.binds
    }

    /// SQL assembled by the caller with explicit `$n` placeholders. The text must not
    /// contain values; pass them in `binds`.
    public init(unsafeSQL sql: String, binds: [PostgresData] = []) {
        self.sql = sql
        self.binds = binds
    }

    /// The same statement, run as a prepared statement named `name` (prepared lazily on
    /// each connection the first time it runs there, then reused).
    public func prepared(as name: String) -> PostgresQuery {
        var copy = self
        copy.preparedName = name
        return copy
    }

    /// `query`, run as a prepared statement named `name`.
    public static func prepared(_ name: String, _ query: PostgresQuery) -> PostgresQuery {
        query.prepared(as: name)
    }

    /// The SQL text with `$n` placeholders; never the bound values.
    public var description: String { sql }

    public struct StringInterpolation: StringInterpolationProtocol {
        var sql = ""
        var binds: [PostgresData] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            sql.reserveCapacity(literalCapacity + interpolationCount * 3)
            binds.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) { sql += literal }

        /// Binds `value` as the next `$n` parameter.
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value) {
            bind(value.postgresData)
        }

        /// Binds `value`, or a NULL of the value's type.
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?) {
            bind(value?.postgresData ?? .null(Value.postgresType))
        }

        /// Inserts a quoted identifier (a table or column name chosen by code, e.g. in tests).
        public mutating func appendInterpolation(identifier: String) {
            sql += "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
        }

        private mutating func bind(_ data: PostgresData) {
            binds.append(data)
            sql += "$\(binds.count)"
        }
    }
}
