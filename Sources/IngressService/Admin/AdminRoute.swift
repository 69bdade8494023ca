import Foundation
import Shared

/// One route: a method and a path pattern under `/admin/v1` whose `:name`
/// segments are parameters, e.g. `GET /apps/:id/keys`.
struct AdminRoute: Sendable {
    typealias Handler = @Sendable (AdminRequest) async throws -> HTTPResponse

    let method: String
    let pattern: [String]
    let handler: Handler

    init(_ method: String, _ path: String, _ handler: @escaping Handler) {
        self.method = method
        self.pattern = path.split(separator: "/").map(String.init)
        self.handler = handler
    }

    /// The parameters if `segments` (percent-decoded by the HTTP server) fit the pattern.
    func match(_ segments: [String]) -> [String: String]? {
        guard segments.count == pattern.count else { return nil }
        var parameters: [String: String] = [:]
        for (expected, actual) in zip(pattern, segments) {
            if expected.hasPrefix(":") {
                guard !actual.isEmpty else { return nil }
                parameters[String(expected.dropFirst())] = actual
            } else if expected != actual {
                return nil
            }
        }
        return parameters
    }
}
