import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

@Suite struct AdminAuthAndRoutingTests {
    /// Postgres out of reach is the operator's "try again", not an internal error.
    @Test func postgresOutOfReachIs503StorageUnavailable() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        let (logger, _) = TestEnvironment.capturingLogger("ingress")
        let postgres = PostgresClient(
            configuration: .init(
                url: databaseURL, maximumConnections: 2, acquireTimeout: .seconds(2), connectTimeout: 2))
        defer { postgres.close() }
        let sealer = try PushCredentialSealer(key: SecureRandom.bytes(32))
        let api = AdminAPI(
            token: AdminHarness.token, postgres: postgres, liveness: PostgresLiveness(postgres: postgres),
            sealer: sealer, probe: NoProbeNeeded(),
            invalidator: NoCacheInvalidator(), logger: logger)
        let server = HTTPServer(
            configuration: .init(address: ListenAddress(host: "127.0.0.1", port: 0)), handler: api, logger: logger)
        try server.start()
        relay.cut()
        let response = try await RawHTTPClient(port: server.port).request(
            "GET", "/admin/v1/accounts", headers: [("Authorization", "Bearer \(AdminHarness.token)")])
        await server.shutdown(deadline: .seconds(1))
        #expect(response.status == 503)
        #expect(response.text.contains(#""code":"storage_unavailable""#))
        #expect(response.headers["retry-after"] == "2")
    }

    /// A Postgres that does not answer at all (frozen, a network dropping everything)
    /// is noticed by the probes `PostgresLiveness` makes while a request waits: 503
    /// within seconds, not whenever the freeze ends.
    @Test func aFrozenPostgresIs503StorageUnavailableWithinSeconds() async throws {
        let (relay, databaseURL) = try TCPRelay.inFront(of: TestEnvironment.databaseURL)
        defer { relay.close() }
        let (logger, _) = TestEnvironment.capturingLogger("ingress")
        let postgres = PostgresClient(url: databaseURL, maximumConnections: 2)
        defer { postgres.close() }
        let api = AdminAPI(
            token: AdminHarness.token, postgres: postgres, liveness: PostgresLiveness(postgres: postgres),
            sealer: try PushCredentialSealer(key: SecureRandom.bytes(32)), probe: NoProbeNeeded(),
            invalidator: NoCacheInvalidator(), logger: logger)
        let server = HTTPServer(
            configuration: .init(address: ListenAddress(host: "127.0.0.1", port: 0)), handler: api, logger: logger)
        try server.start()
        let client = RawHTTPClient(port: server.port)
        let headers = [("Authorization", "Bearer \(AdminHarness.token)")]
        #expect(try await client.request("GET", "/admin/v1/accounts", headers: headers).status == 200)  // a connection open

        relay.freeze()
        let started = ContinuousClock.now
        let response = try await client.request("GET", "/admin/v1/accounts", headers: headers)
        let took = ContinuousClock.now - started
        relay.thaw()
        await server.shutdown(deadline: .seconds(1))
        #expect(response.status == 503)
        #expect(response.text.contains(#""code":"storage_unavailable""#))
        #expect(response.headers["retry-after"] == "2")
        #expect(took < .seconds(12), "answered after \(took)")
    }

    /// Work that rightly takes long (here, waiting for a row lock) is waited for as long
    /// as Postgres answers: the probes find it alive, and the change is answered.
    @Test func aLongRequestIsWaitedForWhilePostgresAnswers() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            let holding = await AdminHarness.lockAccount(account, forSeconds: 8)
            let started = ContinuousClock.now
            let renamed = try await admin.call("PATCH", "/accounts/\(account)", ["name": "Renamed"])
            let took = ContinuousClock.now - started
            try await holding.value
            #expect(renamed.status == 200, "\(renamed.text)")
            #expect(took > .seconds(6), "the lock was held for 8 s; answered after \(took)")
        }
    }

    @Test func missingOrWrongTokenIsAnswered401WithJSONError() async throws {
        try await AdminHarness.with { admin in
            // The first refusal is the one logged (a line a minute): without the actor claimed.
            let claimed = try await admin.call("GET", "/accounts", token: "x", headers: [("X-Actor", "mallory")])
            #expect(claimed.status == 401)
            let missing = try await admin.call("GET", "/accounts", token: nil)
            #expect(missing.status == 401)
            #expect(missing.errorCode == "unauthorized")
            let wrong = try await admin.call("GET", "/accounts", token: AdminHarness.token + "x")
            #expect(wrong.status == 401)
            #expect(
                wrong.text == #"{"error":{"code":"unauthorized","message":"a valid admin bearer token is required"}}"#)
            for _ in 0..<20 { _ = try await admin.call("GET", "/accounts", token: "x") }
            let refusals = admin.logs.all.filter { $0.contains("admin requests refused") }
            #expect(refusals.count == 1)
            #expect(refusals.first?.contains("mallory") == false)
        }
    }

    @Test func unknownRouteIs404AndWrongMethodIs405WithAllow() async throws {
        try await AdminHarness.with { admin in
            let unknown = try await admin.call("GET", "/nothing-here")
            #expect(unknown.status == 404)
            #expect(unknown.errorCode == "route_not_found")
            let method = try await admin.call("POST", "/accounts/x/usage")
            #expect(method.status == 405)
            #expect(method.errorCode == "method_not_allowed")
            #expect(method.headers["allow"] == "GET, HEAD")
            // HEAD wherever GET is (RFC 9110 §9.1): the status and headers, no body.
            let head = try await admin.call("HEAD", "/accounts")
            #expect(head.status == 200)
            #expect(head.text.isEmpty)
            let push = try await admin.call("POST", "/apps/x/push")
            #expect(push.status == 405)
            #expect(push.headers["allow"] == "PATCH, PUT")
            let missing = try await admin.call("GET", "/accounts/\(AdminHarness.unique("none"))")
            #expect(missing.status == 404)
            #expect(missing.errorCode == "not_found")
        }
    }

    /// An empty path segment is not skipped: collapsed, `DELETE /accounts//X` (an id
    /// left out, or a `%2F` one) would delete the account X (probe 133). One trailing
    /// slash still reaches the route.
    @Test func anEmptyPathSegmentIs404NotAnotherResource() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            for path in ["/accounts//\(account)", "/accounts/%2F\(account)", "//accounts/\(account)", "/accounts//"] {
                let answer = try await admin.call("DELETE", path)
                #expect(answer.status == 404, "\(path)")
                #expect(answer.errorCode == "route_not_found", "\(path)")
            }
            #expect(try await admin.call("GET", "/accounts/\(account)//usage").status == 404)
            #expect(try await admin.call("GET", "/accounts/\(account)/").status == 200)
            #expect(try await admin.call("GET", "/accounts/").status == 200)
        }
    }

    /// A value the checks let through but Postgres cannot store (a NUL in an id) is
    /// the request's fault: 400, not 500 `internal`. Query parameters given twice with
    /// different values, or empty where they name something, are refused as well, and
    /// so is an `X-Actor` with control characters or bytes that were not UTF-8.
    @Test func unstorableValuesRepeatedOrEmptyParametersAndUnprintableActorsAre400() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.account()
            let app = try await admin.app(account: account)
            let nul = try await admin.call("PATCH", "/apps/\(app)/push", raw: #"{"credentialId":"x\u0000"}"#)
            #expect(nul.status == 400, "\(nul.text)")
            #expect(nul.errorMessage == "a value holds a character that cannot be stored")
            let twice = try await admin.call("GET", "/accounts/\(account)/daily-counts?from=2026-12-01&from=2026-11-01")
            #expect(twice.status == 400)
            #expect(twice.errorMessage == "query parameter from is given twice with different values")
            #expect(
                try await admin.call("GET", "/accounts/\(account)/daily-counts?from=2026-12-01&from=2026-12-01").status
                    == 200)
            let empty = try await admin.call("GET", "/accounts/\(account)/daily-counts?app=")
            #expect(empty.status == 400)
            #expect(empty.errorMessage == "query parameter app must not be empty")
            #expect(try await admin.call("GET", "/accounts?limit=1&limit=2").status == 400)
            for actor in ["\u{FFFD}x", "a\u{0085}b"] {
                let answer = try await admin.call("GET", "/accounts", headers: [("X-Actor", actor)])
                #expect(answer.status == 400)
                #expect(answer.errorMessage == "X-Actor must be 1 to 100 printable characters")
            }
            #expect(try await admin.call("GET", "/accounts", headers: [("X-Actor", "Zoë Ω")]).status == 200)
        }
    }

    @Test func malformedBodiesAre400NamingTheField() async throws {
        try await AdminHarness.with { admin in
            let notJSON = try await admin.call("POST", "/accounts", raw: "{not json")
            #expect(notJSON.status == 400)
            #expect(notJSON.errorMessage == "the request body is not valid JSON")
            let badPlan = try await admin.call("POST", "/accounts", ["plan": "gold"])
            #expect(badPlan.status == 400)
            #expect(badPlan.errorMessage == "field plan has an invalid value")
            let badType = try await admin.call("POST", "/accounts", ["name": 5])
            #expect(badType.status == 400)
            #expect(badType.errorMessage == "field name must be a string")
            let notObject = try await admin.call("POST", "/accounts", raw: "[]")
            #expect(notObject.status == 400)
            #expect(notObject.errorMessage == "the request body must be a JSON object")
            let null = try await admin.call("POST", "/accounts", raw: "null")
            #expect(null.errorMessage == "the request body must be a JSON object")
            let notArray = try await admin.call("PATCH", "/apps/x/push", ["bundleIds": 5])
            #expect(notArray.status == 400)
            #expect(notArray.errorMessage == "field bundleIds must be an array")
            let scopes = try await admin.call("POST", "/apps/x/keys", ["scopes": "push:send"])
            #expect(scopes.errorMessage == "field scopes must be an array")
            let nested = try await admin.call("PATCH", "/apps/x/push", ["bundleIds": [5]])
            #expect(nested.errorMessage == "field bundleIds[0] must be a string")
            let badID = try await admin.call("POST", "/accounts", ["id": "has space"])
            #expect(badID.status == 400)
            #expect(badID.errorCode == "invalid_request")
        }
    }

    /// README's bodies such as `{id?, name?, plan?}` are all optional: no body means `{}`;
    /// a route with required fields names the first one missing.
    @Test func aMissingBodyIsAnEmptyObject() async throws {
        try await AdminHarness.with { admin in
            let account = try await admin.call("POST", "/accounts")
            #expect(account.status == 201)
            #expect(account.json["plan"] as? String == "lite")
            let id = try #require(account.json["id"] as? String)
            let app = try await admin.call("POST", "/accounts/\(id)/apps")
            #expect(app.status == 201)
            let appID = try #require(app.json["id"] as? String)
            let key = try await admin.call("POST", "/apps/\(appID)/keys")
            #expect(key.status == 201)
            #expect(key.json["scopes"] as? [String] == ["push:send"])
            let credential = try await admin.call("POST", "/accounts/\(id)/credentials")
            #expect(credential.status == 400)
            #expect(credential.errorMessage == "field keyId is required")
            #expect(try await admin.call("DELETE", "/accounts/\(id)").status == 204)
        }
    }

    /// The HTTP server hands over the path percent-decoded already: `%2541` is the
    /// id `x%41` (refused: `%` is not allowed), never the user `xA`.
    @Test func thePathIsPercentDecodedOnce() async throws {
        try await AdminHarness.with { admin in
            let base = AdminHarness.unique("user")
            let literal = try await admin.call("PUT", "/users/\(base)%2541")
            #expect(literal.status == 400)
            #expect(literal.errorCode == "invalid_request")
            #expect(try await admin.call("GET", "/users/\(base)A").status == 404)
            let encoded = try await admin.call("PUT", "/users/\(base)%40x")
            #expect(encoded.status == 201)
            #expect(encoded.json["id"] as? String == "\(base)@x")
            #expect(try await admin.call("DELETE", "/users/\(base)@x").status == 204)
        }
    }

    /// Postgres refuses NUL in text: one in a reason is the caller's mistake (400),
    /// never a failed query (500). (In a path or query, libmicrohttpd's decoding
    /// ends the text at a `%00`.)
    @Test func aControlCharacterInAReasonIs400() async throws {
        try await AdminHarness.with { admin in
            let user = AdminHarness.unique("user")
            #expect(try await admin.call("PUT", "/users/\(user)").status == 201)
            let banned = try await admin.call("PUT", "/users/\(user)/ban", ["reason": "spam\u{0}"])
            #expect(banned.status == 400)
            #expect(banned.errorMessage == "reason must not contain control characters")
            let lines = try await admin.call("PUT", "/users/\(user)/ban", ["reason": "spam\nand more"])
            #expect(lines.status == 200)
        }
    }
}
