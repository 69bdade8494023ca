import Foundation
import Shared
import TestSupport
import Testing

@testable import IngressService

@Suite struct WebPushRoutesTests {
    @Test func activeSubscriptionIsEnqueuedWithEverythingTheWorkerNeeds() async throws {
        try await IngressTestApp.with(["PUSH_TTL_MAX_SECONDS": "86400"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic, sandbox: true)
            let message = Fixture.message(recordLength: 300)
            let before = Int64(Date().timeIntervalSince1970 * 1000)
            let response = try await app.push(
                id, body: message,
                headers: [
                    ("TTL", "999999999"), ("Content-Encoding", "aes128gcm"), ("Urgency", "low"), ("Topic", "inbox-1"),
                ])
            #expect(response.status == 201)
            #expect(response.headers["ttl"] == "86400")
            let location = try #require(response.headers["location"])
            #expect(location.hasPrefix("\(IngressTestApp.publicBase)/api/push/m/"))
            let entries = try await app.queueEntries()
            #expect(entries.count == 1)
            let entry = try #require(entries.first)
            let token = try await app.postgres.query("SELECT device_token FROM subscriptions WHERE id = \(id)")
            #expect(entry.messageID == String(location.split(separator: "/").last!))
            #expect(entry.subscriptionID == id)
            #expect(entry.appID == fixture.appID)
            #expect(entry.accountID == fixture.accountID)
            #expect(entry.credentialID == fixture.credentialID)
            #expect(entry.topic == fixture.topic)
            #expect(entry.deviceToken == (try token.first?.decode("device_token", as: String.self)))
            #expect(entry.sandbox)
            #expect(entry.alertTitle == "")
            #expect(entry.alertBody == "New notification")
            #expect(entry.ciphertext == message)
            #expect(entry.priority == 5)
            #expect(entry.collapseID == "inbox-1")
            #expect(entry.acceptedAt >= before && entry.acceptedAt <= before + 5000)
            #expect(entry.expiration == entry.acceptedAt / 1000 + 86400)
            #expect(entry.quotaKey == app.keys.quota(account: fixture.accountID, month: RedisKeys.quotaMonth()))
            #expect(try await app.redis.send("GET", entry.quotaKey).int == 1)
        }
    }

    @Test func defaultsAreNormalPriorityNoCollapseIdAndTTLZeroMeansNowOrNever() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let response = try await app.push(id, headers: [("TTL", "0"), ("Content-Encoding", "aes128gcm")])
            #expect(response.status == 201)
            #expect(response.headers["ttl"] == "0")
            let entry = try #require(try await app.queueEntries().first)
            #expect(entry.priority == 10)
            #expect(entry.expiration == 0)
            #expect(entry.collapseID == nil)
        }
    }

    @Test func olderStalwartBase64URLJSONFormDeliversTheSameBytes() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let message = Fixture.message()
            let text = Base64URL.encode(message)
            // A random salt starts with "{" once in 256 messages: still a message.
            var braced = message
            braced[0] = UInt8(ascii: "{")
            for body in [text, "\"\(text)\"\n", Base64URL.encode(braced)] {
                let response = try await app.push(
                    id, body: Array(body.utf8), headers: [("TTL", "60"), ("Content-Type", "application/json")])
                #expect(response.status == 201, "\(response.text)")
            }
            #expect(try await app.queueEntries().map(\.ciphertext) == [message, message, braced])
            // Its 8 KB limit applies to the decoded message.
            let big = Array(Base64URL.encode(Fixture.message(recordLength: 8192 - 86 + 1, recordSize: 9000)).utf8)
            let tooLarge = try await app.push(
                id, body: big, headers: [("TTL", "60"), ("Content-Type", "application/json")])
            #expect(tooLarge.status == 413)
            #expect(tooLarge.text == errorBody(1004, "Message too large"))
        }
    }

    /// Stalwart's push (2022–2025) sends the text form with `Content-Encoding: aes128gcm`
    /// too, padded; other senders put the message itself under a JSON content type.
    @Test func base64URLTextWithContentEncodingAndAJSONTypeIsDecodedAndTheBinaryFormKept() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let headers = [("TTL", "86400"), ("Content-Type", "application/json"), ("Content-Encoding", "aes128gcm")]
            let message = Fixture.message()
            let largest = Fixture.message(recordLength: 8192 - 86, recordSize: 9000)
            for body in [message, largest] {
                let padded = Data(body).base64EncodedString().replacingOccurrences(of: "+", with: "-")
                    .replacingOccurrences(of: "/", with: "_")
                let response = try await app.push(id, body: Array(padded.utf8), headers: headers)
                #expect(response.status == 201, "\(response.text)")
            }
            #expect(try await app.push(id, body: message, headers: headers).status == 201)
            #expect(try await app.queueEntries().map(\.ciphertext) == [message, largest, message])
            let over = Base64URL.encode(Fixture.message(recordLength: 8192 - 86 + 1, recordSize: 9000))
            let tooLarge = try await app.push(id, body: Array(over.utf8), headers: headers)
            #expect(tooLarge.status == 413)
            #expect(tooLarge.text == errorBody(1004, "Message too large"))
            let binaryTooLarge = try await app.push(
                id, body: Fixture.message(recordLength: 8192 - 86 + 1, recordSize: 9000), headers: headers)
            #expect(binaryTooLarge.status == 413)
            let garbage = try await app.push(id, body: Array("not*base64".utf8), headers: headers)
            #expect(garbage.text == errorBody(1001, "Invalid parameters: body is not base64url"))
            // A JMAP StateChange in clear (a subscription made without keys), with or
            // without Content-Encoding.
            let clear = Array(#"{"@type":"StateChange","changed":{}}"#.utf8)
            let clearText = Array(Base64URL.encode(clear).utf8)  // the same, base64url-encoded
            for (body, headers) in [
                (clear, headers), (clear, [("TTL", "60"), ("Content-Type", "application/json")]), (clearText, headers),
            ] {
                let unencrypted = try await app.push(id, body: body, headers: headers)
                #expect(
                    unencrypted.text
                        == errorBody(
                            1001,
                            "Invalid parameters: body is not encrypted: the push subscription needs the device's keys (RFC 8291)"
                        ))
            }
            // The text form without a JSON type is read as the message itself: the
            // answer says what is wrong rather than blame its keyid.
            for body in [Base64URL.encode(message), Data(message).base64EncodedString()] {
                let untyped = try await app.push(
                    id, body: Array(body.utf8), headers: [("TTL", "60"), ("Content-Encoding", "aes128gcm")])
                #expect(
                    untyped.text
                        == errorBody(
                            1001,
                            "Invalid parameters: body is base64 text: send it as Content-Type: application/json, or send the bytes"
                        ))
            }
            #expect(try await app.queueLength() == 3)
        }
    }

    /// Apache James sends the message itself as `application/json; charset=utf-8`
    /// without `Content-Encoding` (its JMAP PushVerification and StateChange pushes),
    /// and its Topic is a padded base64url text (24 characters ending in `==`).
    @Test func apacheJamesBinaryBodyUnderAJSONTypeAndPaddedTopicAreAccepted() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let message = Fixture.message()
            let topic = Data((0..<16).map { UInt8($0 * 7) }).base64EncodedString()
                .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            #expect(topic.count == 24 && topic.hasSuffix("=="))
            // James writes it without the `;`; the usual form has one.
            for type in ["application/json charset=utf-8", "application/json; charset=utf-8"] {
                let response = try await app.push(
                    id, body: message, headers: [("TTL", "2419200"), ("Content-Type", type), ("Topic", topic)])
                #expect(response.status == 201, "\(response.text)")
            }
            let entries = try await app.queueEntries()
            #expect(entries.map(\.ciphertext) == [message, message])
            #expect(entries.map(\.collapseID) == [topic, topic])
            // Another media type is not JSON: without Content-Encoding, a 400.
            let other = try await app.push(
                id, body: message, headers: [("TTL", "60"), ("Content-Type", "application/jsonx")])
            #expect(other.status == 400)
        }
    }

    @Test func realRFC8291BodyFromPywebpushIsAccepted() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let body = try await PythonWebPush.encrypt("hello from pywebpush")
            let response = try await app.push(id, body: body)
            #expect(response.status == 201)
            #expect(try await app.queueEntries().first?.ciphertext == body)
        }
    }

    static let badHeaders: [([(String, String)], String)] = [
        ([("Content-Encoding", "aes128gcm")], "TTL header is required"),
        ([("TTL", "-1"), ("Content-Encoding", "aes128gcm")], "TTL must be a non-negative integer"),
        ([("TTL", "1.5"), ("Content-Encoding", "aes128gcm")], "TTL must be a non-negative integer"),
        ([("TTL", "abc"), ("Content-Encoding", "aes128gcm")], "TTL must be a non-negative integer"),
        (
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Urgency", "urgent")],
            "Urgency must be very-low, low, normal or high"
        ),
        (
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Topic", String(repeating: "a", count: 33))],
            "Topic must be 1 to 32 base64url characters"
        ),
        (
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Topic", "a b")],
            "Topic must be 1 to 32 base64url characters"
        ),
        // Padding only at the end, at most two, and within the 32 characters.
        (
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Topic", "a===")],
            "Topic must be 1 to 32 base64url characters"
        ),
        (
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Topic", "a=b")],
            "Topic must be 1 to 32 base64url characters"
        ),
        (
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Topic", "==")],
            "Topic must be 1 to 32 base64url characters"
        ),
        (
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Topic", String(repeating: "a", count: 31) + "==")],
            "Topic must be 1 to 32 base64url characters"
        ),
        ([("TTL", "60"), ("Content-Encoding", "aesgcm")], "Content-Encoding must be aes128gcm"),
        ([("TTL", "60")], "Content-Encoding must be aes128gcm"),
        // One value each: repeated with another value, the sender's meaning is unknowable.
        ([("TTL", "60"), ("ttl", "0"), ("Content-Encoding", "aes128gcm")], "TTL must be given once"),
        (
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Urgency", "high"), ("Urgency", "low")],
            "Urgency must be given once"
        ),
        (
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Topic", "a"), ("Topic", "b")],
            "Topic must be given once"
        ),
        (
            [("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("Content-Encoding", "aesgcm")],
            "Content-Encoding must be given once"
        ),
    ]

    @Test func invalidHeadersAnswer1001() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            for (headers, detail) in Self.badHeaders {
                let response = try await app.push(id, headers: headers)
                #expect(response.status == 400, "\(headers)")
                #expect(response.text == errorBody(1001, "Invalid parameters: \(detail)"), "\(headers)")
            }
            #expect(try await app.queueLength() == 0)
        }
    }

    @Test func aHeaderRepeatedWithItsOwnValueIsAccepted() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let response = try await app.push(
                id,
                headers: [
                    ("TTL", "60"), ("TTL", "60"), ("Content-Encoding", "aes128gcm"), ("content-encoding", "AES128GCM"),
                    ("Urgency", "low"), ("Urgency", "LOW"),
                ])
            #expect(response.status == 201)
            #expect(response.headers["ttl"] == "60")
            #expect(try await app.queueEntries().first?.priority == 5)
        }
    }

    /// RFC 8030 allows a push without payload (pywebpush sends one for empty data);
    /// the service relays ciphertext only, and says so rather than blame the encoding.
    @Test func aPushWithoutBodyIsRefusedAsEmpty() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let empty = try await app.push(id, body: [], headers: [("TTL", "60")])
            #expect(empty.status == 400)
            #expect(
                empty.text
                    == errorBody(1001, "Invalid parameters: the body is empty: a push must carry an aes128gcm message"))
            let encoded = try await app.push(id, body: [], headers: [("TTL", "60"), ("Content-Encoding", "aes128gcm")])
            #expect(encoded.text == errorBody(1001, "Invalid parameters: body is not an aes128gcm message (too short)"))
            #expect(try await app.queueLength() == 0)
        }
    }

    @Test func malformedAes128gcmBodiesAnswer1001() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            var wrongIDLength = Fixture.message()
            wrongIDLength[20] = 64
            var compressedKey = Fixture.message()
            compressedKey[21] = 0x02
            var offCurveKey = Fixture.message()
            offCurveKey[85] ^= 0x01  // the last byte of Y: (X, Y') no longer satisfies the curve equation
            var zeroKey = Fixture.message()
            zeroKey.replaceSubrange(22..<86, with: [UInt8](repeating: 0, count: 64))
            let cases: [([UInt8], String)] = [
                ([], "body is not an aes128gcm message (too short)"),
                (Array(Fixture.message().prefix(86 + 16)), "body is not an aes128gcm message (too short)"),
                (Fixture.message(recordSize: 17), "aes128gcm record size must be at least 18"),
                (wrongIDLength, "aes128gcm keyid must be an uncompressed P-256 point"),
                (compressedKey, "aes128gcm keyid must be an uncompressed P-256 point"),
                (offCurveKey, "aes128gcm keyid is not a point on P-256"),
                (zeroKey, "aes128gcm keyid is not a point on P-256"),
                (Fixture.message(recordLength: 200, recordSize: 100), "aes128gcm body must be a single record"),
            ]
            for (body, detail) in cases {
                let response = try await app.push(id, body: body)
                #expect(response.status == 400, "\(detail)")
                #expect(response.text == errorBody(1001, "Invalid parameters: \(detail)"))
            }
            let text = try await app.push(
                id, body: Array("not*base64".utf8), headers: [("TTL", "60"), ("Content-Type", "application/json")])
            #expect(text.text == errorBody(1001, "Invalid parameters: body is not base64url"))
            #expect(try await app.queueLength() == 0)
        }
    }

    @Test func unknownIdIs404AndTombstoneIs410() async throws {
        try await IngressTestApp.with { app in
            for id in [Base64URL.encode(SecureRandom.bytes(16)), "short", "x%2F..%2Fy"] {
                let response = try await app.push(id)
                #expect(response.status == 404)
                #expect(response.text == errorBody(1003, "Subscription not found"))
            }
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)
            // What the worker does when APNs says the token is gone.
            try await app.postgres.execute("DELETE FROM subscriptions WHERE id = \(id)")
            try await app.app.invalidation.subscriptionGone(id, app: fixture.appID)
            let gone = try await app.push(id)
            #expect(gone.status == 410)
            #expect(gone.text == errorBody(1003, "Subscription not found"))
            let ttl = try await app.redis.send("TTL", app.keys.tombstone(id)).int ?? 0
            #expect(ttl > 29 * 86_400)
            // A pending one's stash leaves the stash expiry's schedule with it.
            let (pending, _) = try await app.subscribe(topic: fixture.topic, activate: false)
            #expect(try await app.push(pending).status == 201)
            #expect(try await app.redis.send("ZSCORE", app.keys.stashesDue, pending) != .null)
            try await app.postgres.execute("DELETE FROM subscriptions WHERE id = \(pending)")
            try await app.app.invalidation.subscriptionGone(pending, app: fixture.appID)
            #expect(try await app.redis.send("ZSCORE", app.keys.stashesDue, pending) == .null)
            #expect(try await app.redis.send("EXISTS", app.keys.stash(pending)).int == 0)
        }
    }

    /// A sender whose request is malformed still learns that its URL is dead (404 or
    /// 410, so it stops); a live URL's malformed request is 400 and costs its window nothing.
    @Test func aMalformedRequestToAnUnknownOrGoneURLIsAnswered404Or410() async throws {
        try await IngressTestApp.with { app in
            let malformed: [(body: [UInt8], headers: [(String, String)])] = [
                (Array("x".utf8), [("TTL", "60"), ("Content-Encoding", "aes128gcm")]),
                (Fixture.message(), [("Content-Encoding", "aes128gcm")]),
                (Fixture.message(), [("TTL", "60"), ("Content-Encoding", "aesgcm")]),
                (Fixture.message(recordLength: 8192 - 86 + 1, recordSize: 9000), [("Urgency", "urgent")]),
            ]
            for id in [Base64URL.encode(SecureRandom.bytes(16)), "short"] {
                for request in malformed {
                    let response = try await app.push(id, body: request.body, headers: request.headers)
                    #expect(response.status == 404, "\(request.headers)")
                    #expect(response.text == errorBody(1003, "Subscription not found"))
                }
            }

            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            for request in malformed {
                #expect(try await app.push(id, body: request.body, headers: request.headers).status == 400)
            }
            let window = try await app.redis.send("LLEN", app.keys.pushRate(id)).int
            #expect(window == 0)

            try await app.postgres.execute("DELETE FROM subscriptions WHERE id = \(id)")
            try await app.app.invalidation.subscriptionGone(id, app: fixture.appID)
            for request in malformed {
                let response = try await app.push(id, body: request.body, headers: request.headers)
                #expect(response.status == 410, "\(request.headers)")
                #expect(response.text == errorBody(1003, "Subscription not found"))
            }
            #expect(try await app.queueLength() == 0)
        }
    }

    @Test func aCacheFillRacingTheGonePathLeavesNoLiveEntryOverTheTombstone() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)
            // The worker set the tombstone and dropped the entry; a fill that read the
            // row before the worker deleted it from Postgres writes afterwards.
            try await app.app.invalidation.subscriptionGone(id, app: fixture.appID)
            let cache = HotPathCache(
                redis: app.redis, keys: app.keys, subscriptions: SubscriptionRepository(postgres: app.postgres),
                directory: AppDirectory(postgres: app.postgres), lifetimeMilliseconds: 60_000)
            try await cache.fill(kind: "subscription", id: id, subscriptionID: id)
            #expect(try await app.redis.send("EXISTS", app.keys.subscription(id)).int == 0)
            #expect(try await app.push(id).status == 410)
            // Without a tombstone the same fill writes the live entry.
            _ = try await app.redis.send("DEL", app.keys.tombstone(id))
            try await cache.fill(kind: "subscription", id: id, subscriptionID: id)
            #expect(try await app.redis.send("EXISTS", app.keys.subscription(id)).int == 1)
            #expect(try await app.push(id).status == 201)
        }
    }

    /// Past its freshness (`CACHE_TTL_SECONDS`) a cache entry is read again from
    /// Postgres, although its key lives on (for use while Postgres cannot be read): a
    /// change the cache was not told of (a failed invalidation) counts within it, for
    /// subscription, app and account entries alike.
    @Test func cacheEntriesPastTheirFreshnessAreReadAgain() async throws {
        try await IngressTestApp.with(["CACHE_TTL_SECONDS": "1", "CACHE_STALE_TTL_SECONDS": "600"]) { app in
            let fixture = try await Fixture.create(app.postgres)
            let otherAccount = try await Fixture.create(app.postgres, plan: "enterprise")
            let (deleted, _) = try await app.subscribe(topic: fixture.topic)
            let (disabled, _) = try await app.subscribe(topic: fixture.topic)
            let (downgraded, _) = try await app.subscribe(topic: otherAccount.topic)
            for id in [deleted, disabled, downgraded] {
                // A push fills its entries one after another; on a busy machine the first may
                // go stale before the last is in (then the push is refused): again.
                let accepted = try await Poll.until(timeout: .seconds(10), interval: .milliseconds(10)) {
                    try await app.push(id).status == 201
                }
                #expect(accepted)
            }
            let lifetime = try await app.redis.send("PTTL", app.keys.subscription(deleted)).int ?? 0
            #expect(lifetime > 300_000, "the entry lives on past its freshness (1 s)")

            // Changed behind the cache's back.
            try await app.postgres.execute("DELETE FROM subscriptions WHERE id = \(deleted)")
            try await app.postgres.execute("UPDATE apps SET push_enabled = false WHERE id = \(fixture.appID)")
            try await app.postgres.execute("UPDATE accounts SET plan = 'lite' WHERE id = \(otherAccount.accountID)")
            try await Task.sleep(for: .milliseconds(1200))
            // Each reads up to three entries again, one per run; on a busy machine one read
            // may age again (1 s) before the last is in, and the push is refused: again.
            func answer(_ id: String) async throws -> Int {
                var status = 503
                for _ in 0..<20 where status == 503 { status = try await app.push(id).status }
                return status
            }
            #expect(try await answer(deleted) == 404)
            #expect(try await answer(disabled) == 403)
            #expect(try await answer(downgraded) == 403)
        }
    }

    /// A fill reads the row, the row changes and the cache is invalidated, then the
    /// fill writes: the old values must not come back (for the cache lifetime).
    @Test func aCacheFillThatReadTheRowBeforeItChangedDoesNotWriteItBack() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let repository = SubscriptionRepository(postgres: app.postgres)
            let cache = HotPathCache(
                redis: app.redis, keys: app.keys, subscriptions: repository,
                directory: AppDirectory(postgres: app.postgres), lifetimeMilliseconds: 60_000)

            // Activation: a stale "pending" entry would stash pushes instead of sending them.
            let (pending, secret) = try await app.subscribe(topic: fixture.topic, activate: false)
            var generation = try await cache.generation(of: app.keys.subscription(pending))
            let pendingRow = try await repository.cacheEntry(pending)
            #expect(pendingRow?.active == false)
            let activated = try await app.request(
                "POST", "/api/push/v1/subscriptions/\(pending)/activate",
                headers: [("Authorization", "Bearer \(secret)")])
            #expect(activated.status == 204)
            #expect(try await cache.store(subscription: pending, pendingRow, generation: generation) == false)
            #expect(try await app.push(pending).status == 201)
            #expect(try await app.queueLength() == 1)

            // Deletion: a stale live entry would keep accepting pushes for a deleted device.
            let (deleted, _) = try await app.subscribe(topic: fixture.topic)
            generation = try await cache.generation(of: app.keys.subscription(deleted))
            let deletedRow = try await repository.cacheEntry(deleted)
            #expect(deletedRow != nil)
            try await app.postgres.execute("DELETE FROM subscriptions WHERE id = \(deleted)")
            try await app.app.invalidation.subscriptionsDeleted([deleted])
            #expect(try await cache.store(subscription: deleted, deletedRow, generation: generation) == false)
            #expect(try await app.push(deleted).status == 404)

            // A fill that began after the change writes what it read.
            generation = try await cache.generation(of: app.keys.subscription(deleted))
            #expect(try await cache.store(subscription: deleted, deletedRow, generation: generation))

            // A generation that expired (10 minutes after its change) and a later
            // change: the fill that read the earlier one still must not write.
            let (changed, _) = try await app.subscribe(topic: fixture.topic)
            let entry = app.keys.subscription(changed)
            _ = try await app.redis.send("DEL", app.keys.cacheGeneration(of: entry))  // the activation's, expired
            try await app.app.invalidation.subscriptionChanged(changed)
            generation = try await cache.generation(of: entry)
            #expect(!generation.isEmpty)
            let changedRow = try await repository.cacheEntry(changed)
            _ = try await app.redis.send("DEL", app.keys.cacheGeneration(of: entry))  // expired
            try await app.app.invalidation.subscriptionChanged(changed)
            #expect(try await cache.store(subscription: changed, changedRow, generation: generation) == false)
        }
    }

    @Test func aCacheEntryOfTheOlderLayoutIsFilledAgain() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)
            _ = try await app.redis.send("HDEL", app.keys.subscription(id), SubscriptionCacheField.part)
            #expect(try await app.push(id).status == 201)
            #expect(
                try await app.redis.send("HEXISTS", app.keys.subscription(id), SubscriptionCacheField.part).int == 1)
            // Nor without the context the script reads instead of app, state and sandbox.
            _ = try await app.redis.send("HDEL", app.keys.subscription(id), SubscriptionCacheField.context)
            #expect(try await app.push(id).status == 201)
            let context = try await app.redis.send("HGET", app.keys.subscription(id), SubscriptionCacheField.context)
            #expect(context.string == "active:0:\(fixture.appID)")
            #expect(try await app.queueEntries().last?.appID == fixture.appID)
        }
    }

    @Test func aSubscriptionsCacheEntryHoldsOnlyWhatTheHotPathReads() async throws {
        // Every cached subscription carries its entry for up to the fresh and stale
        // lifetimes together: a field the script never reads is memory for nothing.
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            // The second push also marks the rate window's expiry in the entry.
            for _ in 0..<2 { #expect(try await app.push(id).status == 201) }
            let names = try await app.redis.send("HKEYS", app.keys.subscription(id)).array?.compactMap(\.string)
            #expect(
                Set(names ?? []) == [
                    SubscriptionCacheField.part, SubscriptionCacheField.context, SubscriptionCacheField.fresh,
                    SubscriptionCacheField.rateWindowExpiry,
                ])
        }
    }

    @Test func aQueuedPushIsAnswered201EvenWhenItsQuotaCountCannotBeWritten() async throws {
        // An unlimited account never reads its count, so a quota key of the wrong type
        // shows only at the run's final write, after the XADD: the push is queued and
        // must be answered as such, not as a storage failure a sender would retry.
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres, plan: "enterprise")
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let quotaKey = app.keys.quota(account: fixture.accountID, month: RedisKeys.quotaMonth())
            _ = try await app.redis.send("RPUSH", quotaKey, "not a counter")
            let before = try await app.queueLength()
            #expect(try await app.push(id).status == 201)
            #expect(try await app.queueLength() == before + 1)
        }
    }

    @Test func disabledAppAndLitePlanAnswer403AfterInvalidation() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)

            try await app.postgres.execute("UPDATE apps SET push_enabled = false WHERE id = \(fixture.appID)")
            try await app.app.invalidation.appChanged(fixture.appID)
            let disabled = try await app.push(id)
            #expect(disabled.status == 403)
            #expect(disabled.text == errorBody(1010, "Push is disabled for this app"))

            try await app.postgres.execute("UPDATE apps SET push_enabled = true WHERE id = \(fixture.appID)")
            try await app.app.invalidation.appChanged(fixture.appID)
            #expect(try await app.push(id).status == 201)

            try await app.postgres.execute("UPDATE accounts SET plan = 'lite' WHERE id = \(fixture.accountID)")
            try await app.app.invalidation.accountChanged(fixture.accountID)
            #expect(try await app.push(id).text == errorBody(1010, "Push is disabled for this app"))
        }
    }

    @Test func perSubscriptionLimitAllows120AndRefusesThe121stWithRetryAfter() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let (other, _) = try await app.subscribe(topic: fixture.topic)
            for index in 1...120 {
                let response = try await app.push(id)
                try #require(response.status == 201, "push \(index) answered \(response.status)")
            }
            let refused = try await app.push(id)
            #expect(refused.status == 429)
            #expect(refused.text == errorBody(1006, "Too many requests"))
            let retry = try #require(refused.headers["retry-after"].flatMap(Int.init))
            #expect(retry >= 1 && retry <= 60)
            #expect(try await app.push(other).status == 201)
            #expect(try await app.queueLength() == 121)
        }
    }

    @Test func quotaUsedUpAnswers1009WhileOtherAccountsContinue() async throws {
        try await IngressTestApp.with { app in
            let full = try await Fixture.create(app.postgres, plan: "plus")
            let other = try await Fixture.create(app.postgres, plan: "plus")
            let enterprise = try await Fixture.create(app.postgres, plan: "enterprise")
            let (fullID, _) = try await app.subscribe(topic: full.topic)
            let (otherID, _) = try await app.subscribe(topic: other.topic)
            let (enterpriseID, _) = try await app.subscribe(topic: enterprise.topic)
            let (pendingID, _) = try await app.subscribe(topic: full.topic, activate: false)
            let month = RedisKeys.quotaMonth()
            _ = try await app.redis.send("SET", app.keys.quota(account: full.accountID, month: month), 49_999)
            _ = try await app.redis.send("SET", app.keys.quota(account: enterprise.accountID, month: month), 10_000_000)
            #expect(try await app.push(fullID).status == 201)  // the 50,000th
            let refused = try await app.push(fullID)
            #expect(refused.status == 429)
            #expect(refused.text == errorBody(1009, "Monthly push quota used up"))
            // Until the next month, or an hour at most (an upgrade frees it at once).
            let retryAfter = try #require(refused.headers["retry-after"].flatMap { Int64($0) })
            let expected = min(QuotaMonthClock().secondsToNextMonth(from: Date()), PushAPIError.quotaRetryCeiling)
            #expect(abs(retryAfter - expected) <= 2)
            #expect(try await app.push(otherID).status == 201)
            #expect(try await app.push(enterpriseID).status == 201)
            // Stashing does not use quota.
            #expect(try await app.push(pendingID).status == 201)
            #expect(
                try await app.redis.send("GET", app.keys.quota(account: full.accountID, month: month)).int == 50_000)
        }
    }

    /// A queued push with a `Topic` records its message as the topic's newest (the
    /// worker drops older ones, RFC 8030 §5.4); a stashed one, or one without a topic,
    /// records nothing; the marks go with the subscription.
    @Test func aQueuedPushWithATopicMarksItsTopicsNewestMessage() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, secret) = try await app.subscribe(topic: fixture.topic)
            let marks = app.keys.topicMarks(id)
            func messageID(_ response: RawHTTPClient.Response) -> String? {
                response.headers["location"].map { String($0.split(separator: "/").last ?? "") }
            }
            let inbox = Fixture.pushHeaders + [("Topic", "inbox")]
            let first = try await app.push(id, headers: inbox)
            #expect(first.status == 201)
            // `<message id>:<accepted at ms>`.
            func markedID() async throws -> String? {
                try await app.redis.send("HGET", marks, "inbox").string?.split(separator: ":").first.map(String.init)
            }
            #expect(try await markedID() == messageID(first))
            let second = try await app.push(id, headers: inbox)
            #expect(try await markedID() == messageID(second))
            #expect(try await app.push(id).status == 201)  // no topic
            #expect(try await app.redis.send("HLEN", marks).int == 1)
            let ttl = try await app.redis.send("PTTL", marks).int ?? 0
            #expect(ttl > 0 && ttl <= Int64(RedisKeys.topicMarksLifetimeMilliseconds))
            // The script writes the constants out (the hot-path bench runs its text).
            for constant in [
                "'\(RedisKeys.topicMarksPrefix)'", "> \(RedisKeys.topicMarksLimit) then",
                "'\(RedisKeys.topicMarksLifetimeMilliseconds)'",
            ] {
                #expect(HotPathScript.script.source.contains(constant), "\(constant)")
            }

            let (pending, _) = try await app.subscribe(topic: fixture.topic, activate: false)
            #expect(try await app.push(pending, headers: inbox).status == 201)  // stashed
            #expect(try await app.redis.send("EXISTS", app.keys.topicMarks(pending)).int == 0)

            let deleted = try await app.request(
                "DELETE", "/api/push/v1/subscriptions/\(id)", headers: [("Authorization", "Bearer \(secret)")])
            #expect(deleted.status == 204)
            #expect(try await app.redis.send("EXISTS", marks).int == 0)
        }
    }

    @Test func bodyOver8KBAnswers413AfterTheEarlierChecks() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let big = Fixture.message(recordLength: 8192 - 86 + 1, recordSize: 9000)
            #expect(big.count == 8193)
            let response = try await app.push(id, body: big)
            #expect(response.status == 413)
            #expect(response.text == errorBody(1004, "Message too large"))
            let exact = Fixture.message(recordLength: 8192 - 86, recordSize: 9000)
            #expect(try await app.push(id, body: exact).status == 201)
            // Unknown ids are 404 even with a large body; missing TTL is still 1001.
            let unknown = try await app.push(Base64URL.encode(SecureRandom.bytes(16)), body: big)
            #expect(unknown.status == 404)
            let noTTL = try await app.push(id, body: big, headers: [("Content-Encoding", "aes128gcm")])
            #expect(noTTL.status == 400)
            try await app.postgres.execute("UPDATE apps SET push_enabled = false WHERE id = \(fixture.appID)")
            try await app.app.invalidation.appChanged(fixture.appID)
            #expect(try await app.push(id, body: big).status == 403)
            #expect(try await app.queueLength() == 1)
        }
    }

    @Test func missingOrRejectedCredentialAndCircuitFlagAnswer502() async throws {
        try await IngressTestApp.with { app in
            let none = try await Fixture.create(app.postgres, credential: nil)
            let rejected = try await Fixture.create(app.postgres, credential: "rejected")
            let healthy = try await Fixture.create(app.postgres)
            for fixture in [none, rejected] {
                let (id, _) = try await app.subscribe(topic: fixture.topic)
                let response = try await app.push(id)
                #expect(response.status == 502)
                #expect(response.text == errorBody(1007, "Delivery failed"))
                // Only the owner can mend a credential: no time to retry after.
                #expect(response.headers["retry-after"] == nil)
            }
            let (id, _) = try await app.subscribe(topic: healthy.topic, sandbox: true)
            _ = try await app.redis.send(
                "SET", app.keys.circuit(credential: healthy.credentialID!, environment: "sandbox"), "1", "PX", 29_000)
            // The circuit's answer says when its flag ends at the latest (rounded up).
            let circuit = try await app.push(id)
            #expect(circuit.status == 502)
            #expect(circuit.text == errorBody(1007, "Delivery failed"))
            #expect(circuit.headers["retry-after"] == "29")
            _ = try await app.redis.send(
                "DEL", app.keys.circuit(credential: healthy.credentialID!, environment: "sandbox"))
            #expect(try await app.push(id).status == 201)
            #expect(try await app.queueLength() == 1)
            // Counted by why: the workers never see these (the alerts on credentials watch them).
            let undeliverable = app.app.metrics.undeliverable
            #expect(undeliverable.value("credential_missing") == 1)
            #expect(undeliverable.value("credential_rejected") == 1)
            #expect(undeliverable.value("circuit") == 1)
            // No quota was reserved for the refused pushes.
            let month = RedisKeys.quotaMonth()
            #expect(try await app.redis.send("GET", app.keys.quota(account: none.accountID, month: month)) == .null)
        }
    }

    /// What senders put on the wire besides a plain Content-Length POST: chunked bodies
    /// (the 8 KB limit counts the body, not the framing), HTTP/1.0, `Expect:
    /// 100-continue`, header names in any case, a query string.
    @Test func chunkedHTTP10ExpectContinueAndHeaderCaseAreAcceptedLikeAPlainPost() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            func send(_ head: String, _ body: [UInt8]) async throws -> RawHTTPClient.Response {
                var raw = try await app.client.exchange(Array(head.utf8) + body)
                let interim = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
                if raw.starts(with: interim) { raw.removeFirst(interim.count) }
                return try RawHTTPClient.parse(raw)
            }
            func chunked(_ body: [UInt8]) -> [UInt8] {
                stride(from: 0, to: body.count, by: 1000).flatMap { start in
                    let chunk = body[start..<min(start + 1000, body.count)]
                    return Array((String(chunk.count, radix: 16) + "\r\n").utf8) + chunk + Array("\r\n".utf8)
                } + Array("0\r\n\r\n".utf8)
            }
            let path = "/api/push/p/\(id)"
            let pushHead = "Host: x\r\nConnection: close\r\nTTL: 60\r\nContent-Encoding: aes128gcm\r\n"
            let exact = Fixture.message(recordLength: 8192 - 86, recordSize: 9000)
            let over = Fixture.message(recordLength: 8192 - 86 + 1, recordSize: 9000)
            let streamed = "POST \(path) HTTP/1.1\r\n\(pushHead)Transfer-Encoding: chunked\r\n\r\n"
            #expect(try await send(streamed, chunked(exact)).status == 201)
            let tooLarge = try await send(streamed, chunked(over))
            #expect(tooLarge.status == 413)
            #expect(tooLarge.text == errorBody(1004, "Message too large"))

            let message = Fixture.message()
            let old = try await send(
                "POST \(path) HTTP/1.0\r\n\(pushHead)Content-Length: \(message.count)\r\n\r\n", message)
            #expect(old.status == 201)
            let expecting = try await send(
                "POST \(path)?x=1 HTTP/1.1\r\n\(pushHead)Expect: 100-continue\r\nContent-Length: \(message.count)\r\n\r\n",
                message)
            #expect(expecting.status == 201)
            let shouting = try await send(
                "POST \(path) HTTP/1.1\r\nHOST: x\r\nCONNECTION: close\r\nttl: 30\r\nCONTENT-ENCODING: AES128GCM\r\n"
                    + "CONTENT-LENGTH: \(message.count)\r\n\r\n", message)
            #expect(shouting.status == 201)
            #expect(shouting.headers["ttl"] == "30")
            #expect(try await app.queueEntries().map(\.ciphertext).suffix(3) == [message, message, message])
        }
    }

    /// A sender reusing its connection after refusals (a missing TTL, a body far over
    /// the limit that is never buffered) is still served on it.
    @Test func aKeptAliveConnectionStillServesAfterRefusedPushes() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            let port = app.app.port
            let statuses = try await onThread {
                let connection = try KeepAliveClient(port: port)
                defer { connection.close() }
                let path = "/api/push/p/\(id)"
                return [
                    try connection.post(path, headers: [("Content-Encoding", "aes128gcm")], body: Fixture.message()),
                    try connection.post(
                        path, headers: Fixture.pushHeaders,
                        body: Fixture.message(recordLength: 70_000, recordSize: 80_000)),
                    try connection.post("/api/push/v1/subscriptions", headers: [], body: Array("{".utf8)),
                    try connection.post(path, headers: Fixture.pushHeaders, body: Fixture.message()),
                ].map(\.status)
            }
            #expect(statuses == [400, 413, 400, 201])
        }
    }

    @Test func secondPushIsServedFromTheCacheWithoutPostgres() async throws {
        try await IngressTestApp.with { app in
            let fixture = try await Fixture.create(app.postgres)
            let (id, _) = try await app.subscribe(topic: fixture.topic)
            #expect(try await app.push(id).status == 201)
            // Rename the row's id: a Postgres lookup would now miss; the cache still answers.
            try await app.postgres.execute("UPDATE subscriptions SET id = \(id + "x") WHERE id = \(id)")
            #expect(try await app.push(id).status == 201)
            try await app.postgres.execute("UPDATE subscriptions SET id = \(id) WHERE id = \(id + "x")")
        }
    }
}
