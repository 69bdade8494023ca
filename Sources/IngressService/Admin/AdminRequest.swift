import Foundation
import Shared

/// One admin API request after authentication: the route's path parameters, the
/// query, the actor recorded in the activity log, and the body decoder.
struct AdminRequest: Sendable {
    let http: HTTPRequest
    /// Path parameters by name (`:id` in the route pattern → `parameters["id"]`).
    let parameters: [String: String]
    /// `X-Actor`, default `admin`.
    let actor: String

    func parameter(_ name: String) -> String { parameters[name] ?? "" }

    /// A query parameter's value, nil when absent. Given twice with different values
    /// it is refused: which one counts would be a guess.
    func query(_ name: String) throws(AdminError) -> String? {
        let values = http.head.query.lazy.filter { $0.name == name }.map(\.value)
        guard let first = values.first else { return nil }
        guard values.allSatisfy({ $0 == first }) else {
            throw .invalid("query parameter \(name) is given twice with different values")
        }
        return first
    }

    /// A query parameter that names something (an id, a day, a cursor): nil when
    /// absent, refused when empty (`?app=` would otherwise match nothing).
    func nonEmptyQuery(_ name: String) throws(AdminError) -> String? {
        guard let value = try query(name) else { return nil }
        guard !value.isEmpty else { throw .invalid("query parameter \(name) must not be empty") }
        return value
    }

    /// A boolean query flag: `true`/`1`/`yes` (absent is false).
    func flag(_ name: String) throws(AdminError) -> Bool {
        guard let value = try query(name) else { return false }
        switch value.lowercased() {
        case "true", "1", "yes", "": return true
        case "false", "0", "no": return false
        default: throw .invalid("query parameter \(name) must be true or false")
        }
    }

    /// A bounded integer query parameter.
    func integer(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws(AdminError) -> Int {
        guard let text = try query(name) else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw .invalid("query parameter \(name) must be an integer in \(range.lowerBound)…\(range.upperBound)")
        }
        return value
    }

    /// The JSON body as `Body`; no body reads as `{}` (most bodies have only optional
    /// fields; a missing required one is named). Messages name the field, never its value.
    func decode<Body: Decodable>(_ type: Body.Type) throws(AdminError) -> Body {
        guard http.body.isEmpty || StrictJSON.isWellFormed(http.body) else {
            throw .invalid("the request body is not valid JSON")
        }
        do {
            return try AdminJSON.decoder.decode(Body.self, from: http.body.isEmpty ? Data("{}".utf8) : Data(http.body))
        } catch let error as AdminError {
            throw error
        } catch let error as DecodingError {
            throw .invalid(Self.describe(error))
        } catch {
            throw .invalid("the request body is not valid JSON")
        }
    }

    static func describe(_ error: DecodingError) -> String {
        /// `bundleIds[0]`, `a.b`: the field's path as a client writes it.
        func path(_ context: DecodingError.Context, _ key: (any CodingKey)? = nil) -> String {
            let keys = context.codingPath + (key.map { [$0] } ?? [])
            return keys.reduce(into: "") { path, key in
                if let index = key.intValue {
                    path += "[\(index)]"
                } else {
                    path += (path.isEmpty ? "" : ".") + key.stringValue
                }
            }
        }
        switch error {
        case .typeMismatch(_, let context) where context.codingPath.isEmpty,
            .valueNotFound(_, let context) where context.codingPath.isEmpty:
            return "the request body must be a JSON object"
        case .keyNotFound(let key, let context): return "field \(path(context, key)) is required"
        case .typeMismatch(let type, let context): return "field \(path(context)) must be \(describe(type))"
        case .valueNotFound(let type, let context): return "field \(path(context)) must be \(describe(type)), not null"
        case .dataCorrupted(let context):
            return context.codingPath.isEmpty
                ? "the request body is not valid JSON" : "field \(path(context)) has an invalid value"
        @unknown default: return "the request body is not valid"
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type, is Double.Type: "a number"
        case is [String].Type: "an array of strings"
        // What JSONDecoder reports when a container is of the wrong kind.
        case is [Any].Type: "an array"
        case is [String: Any].Type: "an object"
        default: "a \(type)"
        }
    }
}
