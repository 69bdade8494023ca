/// The column names and types of one result, shared by its rows.
public final class PostgresColumns: Sendable {
    public let names: [String]
    public let types: [PostgresDataType]
    private let indexByName: [String: Int]

    init(names: [String], types: [PostgresDataType]) {
        self.names = names
        self.types = types
        // The first column of a name wins, as in SQL when names repeat.
        self.indexByName = Dictionary(names.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
    }

    func index(of name: String) -> Int? { indexByName[name] }
}

/// One result row, copied out of libpq's result (so it outlives it). Values are
/// decoded on demand by column name or index:
///
///     let title = try row.decode("alert_title", as: String.self)
///     let userID = try row.decode("user_id", as: String?.self)   // nil for NULL
public struct PostgresRow: Sendable {
    public let columns: PostgresColumns
    let values: [[UInt8]?]

    init(columns: PostgresColumns, values: [[UInt8]?]) {
        self.columns = columns
        self.values = values
    }

    public var count: Int { values.count }

    public func decode<Value: PostgresDecodable>(_ column: String, as type: Value.Type = Value.self) throws -> Value {
        guard let index = columns.index(of: column) else {
            throw PostgresError(code: .noSuchColumn, message: "\"\(column)\"")
        }
        return try decode(index, as: type)
    }

    public func decode<Value: PostgresDecodable>(_ index: Int, as type: Value.Type = Value.self) throws -> Value {
        guard values.indices.contains(index) else {
            throw PostgresError(code: .noSuchColumn, message: "index \(index) of \(values.count)")
        }
        return try Value.decode(
            from: PostgresCell(bytes: values[index], type: columns.types[index], column: columns.names[index]))
    }

    /// Whether the column is SQL NULL.
    public func isNull(_ column: String) throws -> Bool {
        guard let index = columns.index(of: column) else {
            throw PostgresError(code: .noSuchColumn, message: "\"\(column)\"")
        }
        return values[index] == nil
    }
}
