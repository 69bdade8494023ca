import Foundation
import TestSupport
import Testing

@testable import IngressService
@testable import Shared

@Suite struct ServiceTests {
    @Test func healthReadinessAndMetrics() async throws {
        try await IngressTestApp.with { app in
            let health = try await app.request("GET", "/healthz")
            #expect(health.status == 200)
            let ready = try await app.request("GET", "/readyz")
            #expect(ready.status == 200)
            #expect(ready.text == #"{"redis":"ok","postgres":"ok"}"#)
            // HEAD too (load balancers may probe with it): the status, no body.
            for path in ["/healthz", "/readyz", "/metrics"] {
                let head = try await app.request("HEAD", path)
                #expect(head.status == 200, "\(path)")
                #expect(head.body.isEmpty, "\(path)")
            }
            let post = try await app.request("POST", "/healthz")
            #expect(post.status == 405)
            #expect(post.headers["allow"] == "GET, HEAD")
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)
            #expect(try await app.push(id, headers: []).status == 400)
            let metrics = try await app.request("GET", "/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
            #expect(metrics.text.contains(#"pushgate_ingress_requests_total{route="POST /p/{id}",status="201"} 1"#))
            #expect(metrics.text.contains(#"pushgate_ingress_requests_total{route="POST /p/{id}",status="400"} 1"#))
            #expect(metrics.text.contains(#"pushgate_ingress_pushes_total{outcome="accepted",code=""} 1"#))
            #expect(metrics.text.contains(#"pushgate_ingress_pushes_total{outcome="rejected",code="1001"} 1"#))
            #expect(
                metrics.text.contains(
                    #"pushgate_ingress_request_duration_seconds_bucket{route="POST /p/{id}",le="+Inf"} 2"#))
            #expect(!metrics.text.contains(id))
            #expect(metrics.text.contains("pushgate_ingress_cache_refresh_failures_total 0\n"))
            // Levels read at the scrape: at least the scrape's own connection is open.
            let open = metrics.text.split(separator: "\n").first { $0.hasPrefix("pushgate_ingress_open_connections ") }
            #expect(open.flatMap { Double($0.split(separator: " ")[1]) }.map { $0 >= 1 } == true)
            #expect(metrics.text.contains("pushgate_ingress_body_memory_bytes 0\n"))
            #expect(metrics.text.contains("pushgate_ingress_requests_in_flight 1\n"))  // the scrape
        }
    }

    /// A request cut off (shutdown, body memory full) answers 503 in its API's own
    /// format: the spec's for pushes and device calls, `{"error": "…"}` for the App API,
    /// with `Retry-After`: another try soon, here or at another replica, may succeed.
    @Test func unavailableAnswersInEachAPIsFormat() async throws {
        try await IngressTestApp.with { app in
            func head(_ path: String) -> HTTPRequestHead {
                HTTPRequestHead(method: "POST", path: path, query: [], headers: HTTPHeaders(), peerAddress: [])
            }
            let handler = app.app.server.handler
            let push = handler.unavailable(head("/api/push/p/AAAAAAAAAAAAAAAAAAAAAA"))
            #expect(push.status == 503)
            #expect(String(decoding: push.body, as: UTF8.self) == errorBody(1005, "Storage error"))
            #expect(push.headers["Retry-After"] == "2")
            let appAPI = handler.unavailable(head("/api/v1/app/push/send"))
            #expect(appAPI.status == 503)
            #expect(appAPI.headers["Retry-After"] == "2")
            #expect(String(decoding: appAPI.body, as: UTF8.self) == #"{"error": "temporarily unavailable; try again"}"#)
        }
    }

    @Test func readinessFailsWhenPostgresIsUnreachable() async throws {
        try await IngressTestApp.with(["DATABASE_URL": "postgresql://pushgate@127.0.0.1:1/pushgate"]) { app in
            let ready = try await app.request("GET", "/readyz")
            #expect(ready.status == 503)
            #expect(ready.text == #"{"redis":"ok","postgres":"down"}"#)
            // And registration, which needs Postgres, is a storage error, not a 201.
            let response = try await app.register(topic: "com.example.none")
            #expect(response.status == 503)
            #expect(response.text == errorBody(1005, "Storage error"))
            #expect(response.headers["retry-after"] == "2")
        }
    }

    @Test func unknownPathsAre404AndWrongMethods405() async throws {
        try await IngressTestApp.with { app in
            #expect(try await app.request("GET", "/nothing").status == 404)
            let wrong = try await app.request("GET", "/api/push/p/abc")
            #expect(wrong.status == 405)
            #expect(wrong.headers["allow"] == "POST")
            #expect(try await app.request("GET", "/api/push/v1/subscriptions").status == 405)
        }
    }

    /// The spec's error format holds for every answer of the public API, not only
    /// its routes' own: a sender or app parsing `{"error": "<code> …"}` finds a code.
    @Test func unknownPathsAndWrongMethodsAnswerInTheSpecsErrorFormat() async throws {
        try await IngressTestApp.with { app in
            for path in ["/nothing", "/api/push/v1/subscriptions/abc/other", "/api/push/p/", "/api/push//p/abc"] {
                let response = try await app.request("POST", path, body: Array("{}".utf8))
                #expect(response.status == 404, "\(path)")
                #expect(response.headers["content-type"] == "application/json")
                #expect(response.text == errorBody(1001, "Invalid parameters: no such endpoint"), "\(path)")
            }
            let get = try await app.request("GET", "/api/push/p/abc")
            #expect(get.status == 405)
            #expect(get.headers["allow"] == "POST")
            #expect(get.text == errorBody(1001, "Invalid parameters: method must be POST"))
            let options = try await app.request("OPTIONS", "/api/push/v1/subscriptions/abc")
            #expect(options.status == 405)
            #expect(options.headers["allow"] == "PUT, DELETE")
            #expect(options.text == errorBody(1001, "Invalid parameters: method must be PUT or DELETE"))
            // The App API keeps its own format.
            let appAPI = try await app.request("GET", "/api/v1/app/push/send")
            #expect(appAPI.status == 405)
            #expect(appAPI.text == #"{"error": "method not allowed"}"#)
            #expect(try await app.request("GET", "/api/v1/app/push/nothing").text == #"{"error": "not found"}"#)
        }
    }

    /// Headers over 8 KiB, or a path and query over 4 KiB, are answered in the
    /// spec's format (the App API in its own), not with libmicrohttpd's HTML.
    @Test func oversizedHeadsAnswerInTheSpecsErrorFormat() async throws {
        try await IngressTestApp.with { app in
            let big = [("X-Padding", String(repeating: "a", count: 9000))]
            let push = try await app.request("POST", "/api/push/p/abc", headers: big + [("TTL", "60")], body: [1])
            #expect(push.status == 431)
            #expect(push.headers["content-type"] == "application/json")
            #expect(push.text == errorBody(1001, "Invalid parameters: request header fields too large"))
            let long = try await app.request("POST", "/api/push/p/" + String(repeating: "a", count: 5000))
            #expect(long.status == 414)
            #expect(long.text == errorBody(1001, "Invalid parameters: request target too long"))
            let appAPI = try await app.request("POST", "/api/v1/app/push/send", headers: big, body: Array("{}".utf8))
            #expect(appAPI.status == 431)
            #expect(appAPI.text == #"{"error": "request header fields too large"}"#)
            // Counted like other answers: the pushes refused among the pushes by code.
            #expect(app.app.metrics.requests.value(Route.deliver(id: "").label, "431") == 1)
            #expect(app.app.metrics.requests.value(Route.deliver(id: "").label, "414") == 1)
            #expect(app.app.metrics.pushes.value("rejected", "1001") == 2)
        }
    }

    /// A trailing slash names the same resource: a sender that adds one to its push
    /// URL must not be told the subscription is gone.
    @Test func aTrailingSlashReachesTheSameRoute() async throws {
        #expect(Route(method: "POST", path: "/api/push/p/abc/") == .deliver(id: "abc"))
        #expect(Route(method: "POST", path: "/api/push/v1/subscriptions/") == .register)
        #expect(Route(method: "PUT", path: "/api/push/v1/subscriptions/abc/") == .update(id: "abc"))
        #expect(Route(method: "GET", path: "/api/push/v1/subscriptions/abc/pending/") == .pending(id: "abc"))
        #expect(Route(method: "POST", path: "/api/push/p/") == .notFound)
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            let push = try await app.request(
                "POST", "/api/push/p/\(id)/", headers: Fixture.pushHeaders, body: Fixture.message())
            #expect(push.status == 201)
            let pending = try await app.request(
                "GET", "/api/push/v1/subscriptions/\(id)/pending/", headers: [("Authorization", "Bearer \(secret)")])
            #expect(pending.status == 200)
            #expect(pending.text.hasPrefix(#"{"messages":[""#))
        }
    }

    /// 64 KB holds any device call, but not an App API batch of 100 messages with
    /// payloads of up to 8 KB each (12 of 4 KB were refused with 413): the batch's body
    /// is read and answered by the App API (here 401, without a key).
    @Test func anAppAPIBatchOfTheLargestMessagesIsReadWhileOtherJSONStaysWithin64KB() async throws {
        try await IngressTestApp.with { app in
            let id = String(repeating: "A", count: 22)
            let payload = String(repeating: "A", count: 10_923)  // 8 KB of base64url
            let message = #"{"subscriptionId":"\#(id)","payload":"\#(payload)","urgency":"very-low"}"#
            let batch = #"{"messages":["# + Array(repeating: message, count: 100).joined(separator: ",") + "]}"
            let read = try await app.request("POST", "/api/v1/app/push/send", body: Array(batch.utf8))
            #expect(read.status == 401)
            let register = try await app.request(
                "POST", "/api/push/v1/subscriptions", body: Array(repeating: UInt8(ascii: " "), count: 64 * 1024 + 1))
            #expect(register.status == 413)
        }
    }

    @Test func routesMatchTheirTemplates() {
        #expect(Route(method: "POST", path: "/api/push/v1/subscriptions") == .register)
        #expect(Route(method: "PUT", path: "/api/push/v1/subscriptions/abc") == .update(id: "abc"))
        #expect(Route(method: "DELETE", path: "/api/push/v1/subscriptions/abc") == .delete(id: "abc"))
        #expect(Route(method: "GET", path: "/api/push/v1/subscriptions/abc/pending") == .pending(id: "abc"))
        #expect(Route(method: "POST", path: "/api/push/v1/subscriptions/abc/activate") == .activate(id: "abc"))
        #expect(Route(method: "POST", path: "/api/push/p/abc") == .deliver(id: "abc"))
        #expect(Route(method: "POST", path: "/api/push/p/abc/def") == .deliver(id: "abc/def"))
        #expect(Route(method: "POST", path: "/api/push/v1/subscriptions/abc/other") == .notFound)
        #expect(
            Route(method: "GET", path: "/api/push/v1/subscriptions/abc/activate") == .methodNotAllowed(allowed: "POST"))
    }

    /// The body limit's shortcut agrees with the route for push paths and their neighbours.
    @Test func deliveryIsToldApartLikeTheRoute() {
        let paths = [
            "/api/push/p/abc", "/api/push/p/abc/", "/api/push/p/", "/api/push/p//", "/api/push/p", "/api/push/",
            "/api/push/p/a/b", "/", "", "/healthz", "/api/push/v1/subscriptions",
        ]
        for path in paths {
            for method in ["POST", "GET"] {
                let isDeliver = if case .deliver = Route(method: method, path: path) { true } else { false }
                #expect(Route.isDelivery(method: method, path: path) == isDeliver, "\(method) \(path)")
            }
        }
    }

    @Test func quotaMonthClockMatchesTheCalendarAcrossMonthEnds() {
        let clock = QuotaMonthClock()
        // 2026-12-31 23:59:59 UTC, the next second, a leap day, a month start and its second before.
        for seconds in [1_798_761_599, 1_798_761_600, 1_709_164_800, 1_709_251_200, 1_709_251_199, 1_798_761_599] {
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            #expect(clock.month(of: date) == RedisKeys.quotaMonth(date), "\(seconds)")
        }
    }

    @Test func quotaMonthClockCountsTheSecondsToTheNextMonth() {
        let clock = QuotaMonthClock()
        // 2026-12-31 23:59:59 UTC → 1; 2027-01-01 00:00:00 → all of January; 2024-02-29 00:00 (leap) → a day.
        for (seconds, expected) in [(1_798_761_599, 1), (1_798_761_600, 31 * 86_400), (1_709_164_800, 86_400)] {
            #expect(clock.secondsToNextMonth(from: Date(timeIntervalSince1970: TimeInterval(seconds))) == expected)
        }
    }

    @Test func postgresNeverReceivesNotificationContent() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (active, _) = try await app.subscribe(topic: fixture.topic)
            let (pending, _) = try await app.subscribe(topic: fixture.topic, activate: false)
            let message = Fixture.message()
            #expect(try await app.push(active, body: message).status == 201)
            #expect(try await app.push(pending, body: message).status == 201)
            let marker = Base64URL.encode(Array(message.suffix(32)))
            let rows = try await app.postgres.query(
                """
                SELECT count(*) AS hits FROM subscriptions s
                WHERE s.id IN (\(active), \(pending)) AND (s::text LIKE '%' || \(marker) || '%'
                    OR position(\(Array(message.suffix(32))) IN coalesce(s.p256dh, '') || coalesce(s.auth, '')) > 0)
                """)
            #expect(try rows.first?.decode("hits", as: Int.self) == 0)
        }
    }

    /// 50 clients × 200 pushes each (one subscription each): exactly 10,000 entries,
    /// every message id once.
    @Test func fiftyClientsTimesTwoHundredPushesGiveExactly10000Entries() async throws {
        try await IngressTestApp.with([
            "RATE_LIMIT_PUSH": "1000/60", "RATE_LIMIT_REGISTRATION": "100/60", "RATE_LIMIT_DEVICE": "100/60",
        ]) { app in
            let fixture = try await Fixture.create(app.postgres, plan: "enterprise")
            var ids: [String] = []
            for _ in 0..<50 { ids.append(try await app.subscribe(topic: fixture.topic).id) }
            let locations = try await withThrowingTaskGroup(of: [String].self) { group in
                for id in ids {
                    let port = app.app.port
                    group.addTask {
                        try await onThread {
                            let connection = try KeepAliveClient(port: port)
                            defer { connection.close() }
                            var locations: [String] = []
                            for _ in 0..<200 {
                                let response = try connection.post(
                                    "/api/push/p/\(id)", headers: Fixture.pushHeaders, body: Fixture.message())
                                guard response.status == 201, let location = response.headers["location"] else {
                                    throw RawHTTPClient.Failure(description: "push answered \(response.status)")
                                }
                                locations.append(location)
                            }
                            return locations
                        }
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(locations.count == 10_000)
            #expect(Set(locations).count == 10_000)
            let entries = try await app.queueEntries()
            #expect(entries.count == 10_000)
            #expect(Set(entries.map(\.messageID)) == Set(locations.map { String($0.split(separator: "/").last!) }))
            let perSubscription = Dictionary(grouping: entries, by: \.subscriptionID).mapValues(\.count)
            #expect(perSubscription.count == 50 && perSubscription.values.allSatisfy { $0 == 200 })
        }
    }
}
