import Foundation

/// Calls the admin API: bearer token, JSON bodies, `X-Actor`; turns its error
/// answers into `PushctlError`s that show the API's code and message.
struct AdminClient {
    let baseURL: URL
    let token: String
    let actor: String?
    /// How long connecting, and each wait for the answer's next bytes, may take.
    static let timeout: Duration = .seconds(60)

    /// `method` on `path` (below `/admin/v1`); returns the parsed JSON (nil for 204).
    /// Blocks its task while it waits: pushctl makes one call at a time.
    func call(_ method: String, _ path: String, query: [(String, String)] = [], body: Any? = nil)
        async throws(PushctlError)
        -> Any?
    {
        var components = URLComponents(
            url: baseURL.appendingPathComponent("admin/v1" + path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        var headers: [(name: String, value: String)] = [
            ("Authorization", "Bearer \(token)"), ("Accept", "application/json"),
        ]
        if let actor { headers.append(("X-Actor", actor)) }
        var bodyBytes: [UInt8] = []
        if let body {
            headers.append(("Content-Type", "application/json"))
            bodyBytes = (try? JSONSerialization.data(withJSONObject: body)).map { Array($0) } ?? []
        }
        let target =
            (components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath)
            + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        let request = AdminHTTPRequest(method: method, target: target, headers: headers, body: bodyBytes)
        let response: AdminHTTPResponse
        do {
            response = try AdminHTTP.exchange(request, to: baseURL, timeout: Self.timeout)
        } catch {
            throw PushctlError(
                kind: .unreachable, message: "cannot reach the admin API at \(baseURL.absoluteString): \(error.reason)")
        }
        let (data, status) = (Data(response.body), response.status)
        let json = data.isEmpty ? nil : try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        guard (200..<300).contains(status) else {
            if let error = (json as? [String: Any])?["error"] as? [String: Any],
                let code = error["code"] as? String, let message = error["message"] as? String
            {
                throw PushctlError(kind: .api(status: status, code: code), message: message)
            }
            throw PushctlError(
                kind: .api(status: status, code: "http_\(status)"),
                message: "the admin API answered HTTP \(status) at \(components.url!.absoluteString)")
        }
        guard data.isEmpty || json != nil else {
            throw PushctlError(
                kind: .unreachable,
                message:
                    "the answer at \(components.url!.absoluteString) is not the admin API's JSON (is this its address?)"
            )
        }
        return json
    }
}
