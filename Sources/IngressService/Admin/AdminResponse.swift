import Foundation
import Shared

/// Builds the admin API's JSON answers.
enum AdminResponse {
    static func json(_ status: Int, _ value: some Encodable) -> HTTPResponse {
        do {
            return HTTPResponse(
                status: status, headers: HTTPHeaders([("Content-Type", "application/json")]),
                body: Array(try AdminJSON.encoder.encode(value)))
        } catch {
            return AdminResponse.error(AdminError(500, "internal", "the response could not be encoded"))
        }
    }

    static func ok(_ value: some Encodable) -> HTTPResponse { json(200, value) }

    static func created(_ value: some Encodable) -> HTTPResponse { json(201, value) }

    static let noContent = HTTPResponse(status: 204)

    static func error(_ error: AdminError) -> HTTPResponse {
        let body =
            "{\"error\":{\"code\":\(JSONString.quote(error.code)),\"message\":\(JSONString.quote(error.message))}}"
        var headers = HTTPHeaders()
        if error.status == 503 { headers.add("Retry-After", String(PushAPIError.unavailableRetrySeconds)) }
        return .json(error.status, body, headers: headers)
    }
}
