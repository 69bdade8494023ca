import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Shared

@Suite struct RedisMultiplexerTests {
    static func multiplexer(commandTimeout: Duration = .seconds(5)) throws -> RedisMultiplexer {
        try RedisMultiplexer(
            url: TestEnvironment.redisURL, options: .init(connectTimeout: .seconds(2), commandTimeout: commandTimeout))
    }

    @Test func twoThousandConcurrentCommandsEachGetTheirOwnReplyAndPerCallerOrderHolds() async throws {
        let redis = try Self.multiplexer()
        defer { redis.close() }
        let prefix = RedisTesting.uniquePrefix("mux-order")
        // 40 callers × 25 steps of two commands: each caller's INCRs on its own key must count 1…25 in
        // order, and each ECHO must come back to the caller that sent it.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for caller in 0..<40 {
                group.addTask {
                    for step in 1...25 {
                        let echo = "caller-\(caller)-step-\(step)"
                        let echoed = try await redis.send("ECHO", echo)
                        #expect(echoed == .bulk(Array(echo.utf8)))
                        let counted = try await redis.send("INCR", prefix + "\(caller)")
                        #expect(counted == .integer(Int64(step)))
                    }
                }
            }
            try await group.waitForAll()
        }
        let client = try RedisTesting.client()
        defer { client.close() }
        for caller in 0..<40 {
            #expect(try await client.send("GET", prefix + "\(caller)") == .bulk(Array("25".utf8)))
        }
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func errorReplyInTheMiddleOfABatchFailsOnlyItsOwnCaller() async throws {
        let redis = try Self.multiplexer()
        defer { redis.close() }
        let prefix = RedisTesting.uniquePrefix("mux-error")
        _ = try await redis.send("SET", prefix + "string", "value")
        let results = await withTaskGroup(of: (Int, Result<RedisReply, RedisError>).self) { group in
            for index in 0..<300 {
                group.addTask {
                    do {
                        let reply =
                            index % 3 == 1
                            ? try await redis.send("LPUSH", prefix + "string", "x")
                            : try await redis.send("ECHO", "ok-\(index)")
                        return (index, .success(reply))
                    } catch let error as RedisError {
                        return (index, .failure(error))
                    } catch {
                        return (index, .failure(RedisError(code: .unexpectedReply, message: "\(error)")))
                    }
                }
            }
            var all: [Int: Result<RedisReply, RedisError>] = [:]
            for await (index, result) in group { all[index] = result }
            return all
        }
        #expect(results.count == 300)
        for (index, result) in results {
            if index % 3 == 1 {
                guard case .failure(let error) = result else {
                    Issue.record("LPUSH on a string succeeded")
                    continue
                }
                #expect(error.code == .server("WRONGTYPE"))
                #expect(error.command == "LPUSH")
            } else {
                #expect(try result.get() == .bulk(Array("ok-\(index)".utf8)))
            }
        }
        #expect(try await redis.send("PING") == .status("PONG"))
        let client = try RedisTesting.client()
        defer { client.close() }
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    @Test func scriptIsLoadedOnFirstUseAndReloadedAfterScriptFlushInsideABatch() async throws {
        let redis = try Self.multiplexer()
        defer { redis.close() }
        let prefix = RedisTesting.uniquePrefix("mux-script")
        let script = RedisScript(source: "return redis.call('INCR', KEYS[1]) -- \(prefix)")
        let client = try RedisTesting.client()
        defer { client.close() }

        // First use: 100 concurrent runs, one SCRIPT LOAD ahead of them on the wire.
        try await Self.runConcurrently(100, script, key: prefix + "n", on: redis)
        #expect(try await client.send("GET", prefix + "n") == .bulk(Array("100".utf8)))

        // The server forgets every script; the next batch meets NOSCRIPT, reloads and re-sends.
        _ = try await client.send("SCRIPT", "FLUSH")
        try await Self.runConcurrently(200, script, key: prefix + "n", on: redis)
        #expect(try await client.send("GET", prefix + "n") == .bulk(Array("300".utf8)))
        try await RedisTesting.cleanUp(client, prefix: prefix)
    }

    static func runConcurrently(_ count: Int, _ script: RedisScript, key: String, on redis: RedisMultiplexer)
        async throws
    {
        let values = try await withThrowingTaskGroup(of: Int64.self) { group in
            for _ in 0..<count { group.addTask { try await redis.run(script, keys: [key]).int ?? -1 } }
            var values: [Int64] = []
            for try await value in group { values.append(value) }
            return values
        }
        // Every run happened exactly once: the counter values are distinct and consecutive.
        #expect(Set(values).count == count)
        #expect(values.max()! - values.min()! == Int64(count - 1))
    }

    @Test func scriptThatDoesNotCompileReportsTheCompileErrorNotNoscript() async throws {
        let redis = try Self.multiplexer()
        defer { redis.close() }
        let script = RedisScript(source: "this is not lua -- \(UInt64.random(in: 0...UInt64.max))")
        let error = try await #require(throws: RedisError.self) { try await redis.run(script) }
        #expect(error.code == .server("ERR"))
        #expect(error.serverMessage?.hasPrefix("ERR Error compiling script") == true)
        #expect(try await redis.send("PING") == .status("PONG"))
    }

    @Test func connectionLossFailsExactlyTheUnansweredCommandsThenANewConnectionServes() async throws {
        // The server reads ten PINGs, answers three, then closes the connection.
        let server = try ScriptedRedis(connections: [.answerThenClose(expect: 10, answer: 3), .answerAll])
        defer { server.stop() }
        let redis = try RedisMultiplexer(url: "redis://127.0.0.1:\(server.port)/0")
        defer { redis.close() }

        let outcomes = await withTaskGroup(of: Result<RedisReply, RedisError>.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    do { return .success(try await redis.send("PING")) } catch let error as RedisError {
                        return .failure(error)
                    } catch { return .failure(RedisError(code: .unexpectedReply, message: "\(error)")) }
                }
            }
            var outcomes: [Result<RedisReply, RedisError>] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        let successes = outcomes.compactMap { try? $0.get() }
        let failures = outcomes.compactMap { outcome -> RedisError? in
            if case .failure(let error) = outcome { return error }
            return nil
        }
        #expect(successes == Array(repeating: .status("PONG"), count: 3))
        #expect(failures.count == 7)
        #expect(failures.allSatisfy { $0.code == .connection && $0.command == "PING" })
        // The next command opens a new connection.
        #expect(try await redis.send("PING") == .status("PONG"))
        #expect(server.accepted == 2)
    }

    @Test func serverThatStopsAnsweringFailsTheCommandsWithTimeoutThenANewConnectionServes() async throws {
        let server = try ScriptedRedis(connections: [.silent, .answerAll])
        defer { server.stop() }
        let redis = try RedisMultiplexer(
            url: "redis://127.0.0.1:\(server.port)/0",
            options: .init(connectTimeout: .seconds(2), commandTimeout: .milliseconds(300)))
        defer { redis.close() }
        let error = try await #require(throws: RedisError.self) { try await redis.send("PING") }
        #expect(error.code == .timeout)
        #expect(error.command == "PING")
        #expect(error.mayHaveRun, "sent, then no answer: it may have run")
        #expect(try await redis.send("PING") == .status("PONG"))
    }

    @Test func unreachableServerFailsWithConnectionErrorAndClosedMultiplexerWithClosed() async throws {
        let redis = try RedisMultiplexer(url: "redis://127.0.0.1:1/0")
        let error = try await #require(throws: RedisError.self) { try await redis.send("PING") }
        #expect(error.code == .connection)
        #expect(!error.mayHaveRun, "nothing was sent")
        redis.close()
        let closed = try await #require(throws: RedisError.self) { try await redis.send("PING") }
        #expect(closed.code == .closed)
    }
    /// While Redis refuses connections, commands fail at once without a connect
    /// attempt each (50 ms doubling to 1 s between attempts), the failure is logged
    /// once, not per batch, and the first attempt after Redis is back serves.
    @Test func aRefusingServerIsRetriedWithBackoffAndLoggedOnce() async throws {
        let (relay, relayedURL) = try TCPRelay.inFront(of: TestEnvironment.redisURL)
        defer { relay.close() }
        let (logger, lines) = TestEnvironment.capturingLogger("mux")
        // Database 1: the connect's handshake (SELECT) meets the cut relay, as it
        // would a Redis that is down, instead of a connection that only fails later.
        #expect(relayedURL.hasSuffix("/0"))
        let database1 = String(relayedURL.dropLast()) + "1"
        let redis = try RedisMultiplexer(url: database1, logger: logger)
        defer { redis.close() }
        #expect(try await redis.send("PING") == .status("PONG"))
        relay.cut()
        for _ in 0..<200 {
            let error = try await #require(throws: RedisError.self) { try await redis.send("PING") }
            #expect(error.code == .connection)
        }
        #expect(lines.all.filter { $0.contains("could not connect") }.count == 1)
        relay.restore()
        let served = try await Poll.until(timeout: .seconds(5), interval: .milliseconds(50)) {
            (try? await redis.send("PING")) == .status("PONG")
        }
        #expect(served)
    }
}

/// A stand-in Redis on loopback that follows a script per accepted connection, for
/// failures a real server does not produce on demand. It only understands PING.
final class ScriptedRedis: @unchecked Sendable {
    enum Behaviour {
        /// Reads `expect` PINGs, answers the first `answer` of them, then closes.
        case answerThenClose(expect: Int, answer: Int)
        /// Reads and never answers (until stopped).
        case silent
        /// Answers every PING.
        case answerAll
    }

    let port: Int
    private let listener: Int32
    private let acceptedCount = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    var accepted: Int { acceptedCount.load(ordering: .acquiring) }

    init(connections: [Behaviour]) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0, listen(listener, 8) == 0 else {
            throw RedisError(code: .connection, message: "cannot listen")
        }
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in serve(connections) }
        thread.start()
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve(_ behaviours: [Behaviour]) {
        for behaviour in behaviours {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            acceptedCount.add(1, ordering: .releasing)
            switch behaviour {
            case .answerThenClose(let expect, let answer):
                readPings(connection, until: expect)
                for _ in 0..<answer { write(connection, "+PONG\r\n") }
                close(connection)
            case .silent:
                Thread { [self] in
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    while !stopped.load(ordering: .acquiring), read(connection, &buffer, buffer.count) > 0 {}
                    close(connection)
                }.start()
            case .answerAll:
                Thread { [self] in
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    while !stopped.load(ordering: .acquiring) {
                        let count = read(connection, &buffer, buffer.count)
                        guard count > 0 else { break }
                        let pings = Self.count(Array("PING".utf8), in: Array(buffer[..<count]))
                        for _ in 0..<pings { write(connection, "+PONG\r\n") }
                    }
                    close(connection)
                }.start()
            }
        }
    }

    private func readPings(_ connection: Int32, until expected: Int) {
        var seen: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Self.count(Array("PING".utf8), in: seen) < expected {
            let count = read(connection, &buffer, buffer.count)
            guard count > 0 else { return }
            seen += buffer[..<count]
        }
    }

    private func write(_ connection: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    static func count(_ needle: [UInt8], in haystack: [UInt8]) -> Int {
        guard haystack.count >= needle.count else { return 0 }
        var found = 0
        var index = 0
        while index <= haystack.count - needle.count {
            if Array(haystack[index..<index + needle.count]) == needle {
                found += 1
                index += needle.count
            } else {
                index += 1
            }
        }
        return found
    }
}

@Suite struct EncodedRedisCommandTests {
    @Test func encodedCommandIsTheRESPOfItsArgv() {
        let command = RedisCommand("SET", "key", [UInt8]([0, 0x0d, 0x0a, 0xff]), 42, Int64(-7), "")
        let encoded = EncodedRedisCommand(command)
        var expected = Array("*6\r\n$3\r\nSET\r\n$3\r\nkey\r\n$4\r\n".utf8)
        expected += [0, 0x0d, 0x0a, 0xff]
        expected += Array("\r\n$2\r\n42\r\n$2\r\n-7\r\n$0\r\n\r\n".utf8)
        #expect(encoded.bytes == expected)
        #expect(encoded.name == "SET")
        #expect(encoded.script == nil)
        let written = EncodedRedisCommand(argumentCount: 6) {
            $0.append("SET")
            $0.append("k", "ey")
            $0.append([0, 0x0d, 0x0a, 0xff])
            $0.append(Int64(42))
            $0.append(Int64(-7))
            $0.append("")
        }
        #expect(written.bytes == expected)
    }

    @Test(arguments: [nil, "collapse-topic"])
    func hotPathEncoderItemAloneIsExactlyTheBytesOfTheScriptCommand(collapseID: String?) {
        let keys = RedisKeys(stream: "pushgate:queue:{7}", namespace: "ns")
        let request = HotPathScript.Request(
            subscriptionID: "AbCdEfGhIjKlMnOpQrStUv", scope: collapseID == nil ? .checkBeforeSize : .push,
            rateLimit: 120,
            rateWindowMilliseconds: 60_000, stashLimit: 5, stashLifetimeMilliseconds: 1_800_000, quotaMonth: "202611",
            messageID: "ZyXwVuTsRqPoNmLkJiHgFe", ciphertext: (0..<300).map { UInt8(truncatingIfNeeded: $0 * 7) },
            priority: 5, expiration: 1_764_000_000, collapseID: collapseID, acceptedAt: 1_763_990_000_123)
        let encoded = HotPathScript.Encoder(keys: keys).item(request).command
        #expect(encoded.bytes == EncodedRedisCommand(HotPathScript.command(request, keys: keys)).bytes)
        #expect(encoded.script == HotPathScript.script)
        #expect(encoded.name == "EVALSHA")
    }
}
