import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Calls the admin API: bearer token, JSON bodies, `X-Actor`; turns its error
/// answers into `PushctlError`s that show the API's code and message.
struct AdminClient {
    let baseURL: URL
    let token: String
    let actor: String?

    /// `method` on `path` (below `/admin/v1`); returns the parsed JSON (nil for 204).
    func call(_ method: String, _ path: String, query: [(String, String)] = [], body: Any? = nil)
        async throws(PushctlError)
        -> Any?
    {
        var components = URLComponents(
            url: baseURL.appendingPathComponent("admin/v1" + path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        var request = URLRequest(url: components.url!)
        request.httpMethod = method
        request.timeoutInterval = 60
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        if let actor { request.setValue(actor, forHTTPHeaderField: "X-Actor") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try? JSONSerialization.data(withJSONObject: body)
        }
        let (data, status) = try await send(request)
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
        return json
    }

    private func send(_ request: URLRequest) async throws(PushctlError) -> (Data, Int) {
        let result: Result<(Data, Int), PushctlError> = await withCheckedContinuation { continuation in
            URLSession.shared.dataTask(with: request) { data, response, error in
                if let error {
                    continuation.resume(
                        returning: .failure(
                            PushctlError(
                                kind: .unreachable,
                                message:
                                    "cannot reach the admin API at \(baseURL.absoluteString): \(error.localizedDescription)"
                            )))
                } else if let http = response as? HTTPURLResponse {
                    continuation.resume(returning: .success((data ?? Data(), http.statusCode)))
                } else {
                    continuation.resume(
                        returning: .failure(
                            PushctlError(kind: .unreachable, message: "no HTTP answer from \(baseURL.absoluteString)")))
                }
            }.resume()
        }
        return try result.get()
    }
}
