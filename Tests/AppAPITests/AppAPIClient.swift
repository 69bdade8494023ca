import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

/// App API calls, keys, users and devices for the tests, on a `DeliveryStack`.
extension DeliveryStack {
    /// Inserts an App API key (as the admin API stores it) for `app` (default the fixture's).
    func apiKey(scopes: [String] = ["push:send"], app: String? = nil, revoked: Bool = false) async throws -> String {
        let key = "pgk_" + Base64URL.encode(SecureRandom.bytes(24))
        try await postgres.execute(
            """
            INSERT INTO app_api_keys (app_id, key_hash, scopes, revoked_at)
            VALUES (\(app ?? fixture.appID), \(SHA256.hash(key)), \(scopes), CASE WHEN \(revoked) THEN now() END)
            """)
        return key
    }

    /// A user who authorized the fixture's app (or not).
    func user(authorized: Bool = true) async throws -> String {
        let id = "u-" + Base64URL.encode(SecureRandom.bytes(9))
        try await postgres.execute("INSERT INTO users (id) VALUES (\(id))")
        if authorized {
            try await postgres.execute(
                "INSERT INTO app_authorizations (user_id, app_id) VALUES (\(id), \(fixture.appID))")
        }
        return id
    }

    func api(_ method: String, _ path: String, key: String?, json: String = "") async throws -> RawHTTPClient.Response {
        var headers: [(String, String)] = [("Content-Type", "application/json")]
        if let key { headers.append(("Authorization", "Bearer \(key)")) }
        return try await request(method, "/api/v1/app/push" + path, headers: headers, body: Array(json.utf8))
    }

    func bind(_ id: String, secret: String, user: String, key: String) async throws -> RawHTTPClient.Response {
        try await api(
            "POST", "/subscriptions/bind", key: key,
            json: #"{"subscriptionId":"\#(id)","secret":"\#(secret)","userId":"\#(user)"}"#)
    }

    /// `POST /send` of `(subscriptionId, payload)` pairs → `[(subscriptionId, status, reason)]`.
    func send(_ messages: [(String, String)], key: String) async throws -> [[String: String]] {
        let items = messages.map { #"{"subscriptionId":"\#($0.0)","payload":"\#($0.1)","urgency":"high"}"# }
        let response = try await api(
            "POST", "/send", key: key, json: #"{"messages":["# + items.joined(separator: ",") + "]}")
        try #require(response.status == 200, "send answered \(response.status) \(response.text)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        return try #require(object["results"] as? [[String: String]])
    }

    func devices(_ user: String, key: String) async throws -> [[String: Any]] {
        let response = try await api("GET", "/users/\(user)/devices", key: key)
        try #require(response.status == 200, "devices answered \(response.status) \(response.text)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        return try #require(object["devices"] as? [[String: Any]])
    }

    /// Registers a device with Web Push keys; `activate` false leaves it pending.
    func device(
        keys: (p256dh: String, auth: String) = Fixture.keys(), sandbox: Bool = false, activate: Bool = true,
        token: String = Fixture.token(), topic: String? = nil
    ) async throws -> (id: String, secret: String, token: String) {
        let json =
            #"{"topic":"\#(topic ?? fixture.topic)","token":"\#(token)","sandbox":\#(sandbox),"keys":{"p256dh":"\#(keys.p256dh)","auth":"\#(keys.auth)"}}"#
        let response = try await request("POST", "/api/push/v1/subscriptions", body: Array(json.utf8))
        try #require(response.status == 201, "registration answered \(response.status) \(response.text)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: String])
        let id = try #require(object["id"])
        let secret = try #require(object["secret"])
        if activate {
            let activated = try await request(
                "POST", "/api/push/v1/subscriptions/\(id)/activate", headers: [("Authorization", "Bearer \(secret)")])
            try #require(activated.status == 204)
        }
        return (id, secret, token)
    }

    static var payload: String { Base64URL.encode(Fixture.message()) }
}

func statuses(_ results: [[String: String]]) -> [String] { results.map { $0["status"] ?? "?" } }
