// apns-bench: the APNs client's throughput against an HTTP/2 server that answers
// 200 to every POST (nghttpd in `scripts/bench apns`). Not a test.
//
//   apns-bench --url https://localhost:PORT --ca-file CA.pem [--count N] [--connections C]
//              [--streams S] [--warmup W] [--device-token HEX] [--topic T] [--apns-id] [--rate R]
//
// Sends W notifications to open the connections, then N more with C × S sends in
// flight (C connections, up to S streams each) — or, with --rate, N more started at
// R per second (latency at a fixed rate) — and prints one JSON line:
// {"count","failures","seconds","perSecond","p50Ms","p99Ms","cpuSeconds","connections","streams",
//  "rate","peakRSSMiB"}.
// CPU seconds are the whole process's (user + system) during the timed part.
// Exit status 1 if any send failed or got an answer other than 200.
import Foundation
import Shared
import Synchronization

struct Options {
    var url = URL(string: "https://localhost:8443")!
    var caFile: String?
    var count = 50_000
    var connections = 4
    var streams = 100
    var warmup = 1_000
    var deviceToken = String(repeating: "a1", count: 32)
    var topic = "com.example.bench"
    var withAPNsID = false
    /// Notifications started per second in the timed part; 0 = as fast as the streams allow.
    var rate = 0

    init(arguments: [String]) {
        var iterator = arguments.dropFirst().makeIterator()
        func value(_ name: String) -> String {
            guard let next = iterator.next() else { Self.fail("\(name) needs a value") }
            return next
        }
        func number(_ name: String) -> Int {
            guard let number = Int(value(name)), number >= 0 else { Self.fail("\(name) needs a non-negative integer") }
            return number
        }
        while let argument = iterator.next() {
            switch argument {
            case "--url":
                guard let url = URL(string: value(argument)) else { Self.fail("--url is not a URL") }
                self.url = url
            case "--ca-file": caFile = value(argument)
            case "--count": count = number(argument)
            case "--connections": connections = max(number(argument), 1)
            case "--streams": streams = max(number(argument), 1)
            case "--warmup": warmup = number(argument)
            case "--device-token": deviceToken = value(argument)
            case "--topic": topic = value(argument)
            case "--apns-id": withAPNsID = true
            case "--rate": rate = number(argument)
            default: Self.fail("unknown argument \(argument)")
            }
        }
    }

    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("apns-bench: \(message)\n".utf8))
        exit(2)
    }
}

/// User + system CPU time of the process so far, in seconds.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The process's peak resident set size, in MiB.
func peakRSSMiB() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024  // kilobytes on Linux
}

func milliseconds(_ duration: Duration) -> Double {
    let (seconds, attoseconds) = duration.components
    return Double(seconds) * 1e3 + Double(attoseconds) / 1e15
}

/// Hands out 0, 1, 2… to the senders.
final class Ticket: Sendable {
    private let value = Atomic<Int>(0)
    func take() -> Int { value.add(1, ordering: .relaxed).oldValue }
}

/// Sends `count` notifications with `senders` sends in flight; returns each
/// send's latency in milliseconds and how many failed.
func run(
    count: Int, senders: Int, client: APNsClient, credential: APNsCredential, environment: APNsEnvironment,
    options: Options
) async -> (latencies: [Double], failures: Int) {
    let next = Ticket()
    let payload = Array(#"{"aps":{"alert":{"title":"Bench","body":"A notification"},"mutable-content":1}}"#.utf8)
    return await withTaskGroup(of: ([Double], Int).self) { group in
        for _ in 0..<min(senders, max(count, 1)) {
            group.addTask {
                var latencies: [Double] = []
                var failures = 0
                let clock = ContinuousClock()
                while next.take() < count {
                    let notification = APNsNotification(
                        deviceToken: options.deviceToken, topic: options.topic, expiration: .immediately,
                        apnsID: options.withAPNsID ? UUID() : nil, payload: payload)
                    let start = clock.now
                    do {
                        let response = try await client.send(
                            notification, credential: credential, environment: environment)
                        if response.status != 200 { failures += 1 }
                    } catch {
                        failures += 1
                    }
                    latencies.append(milliseconds(clock.now - start))
                }
                return (latencies, failures)
            }
        }
        var all: [Double] = []
        all.reserveCapacity(count)
        var failures = 0
        for await (latencies, failed) in group {
            all.append(contentsOf: latencies)
            failures += failed
        }
        return (all, failures)
    }
}

/// Starts `count` sends at `rate` per second, each on its own task, whatever the
/// answers' pace; returns each send's latency in milliseconds and how many failed.
func runPaced(
    count: Int, rate: Int, client: APNsClient, credential: APNsCredential, environment: APNsEnvironment,
    options: Options
) async -> (latencies: [Double], failures: Int) {
    let payload = Array(#"{"aps":{"alert":{"title":"Bench","body":"A notification"},"mutable-content":1}}"#.utf8)
    let clock = ContinuousClock()
    let start = clock.now
    let interval = Duration.seconds(1) / max(rate, 1)
    return await withTaskGroup(of: (Double, Bool).self) { group in
        for index in 0..<count {
            try? await clock.sleep(until: start + interval * index)
            group.addTask {
                let notification = APNsNotification(
                    deviceToken: options.deviceToken, topic: options.topic, expiration: .immediately,
                    apnsID: options.withAPNsID ? UUID() : nil, payload: payload)
                let sent = clock.now
                let response = try? await client.send(notification, credential: credential, environment: environment)
                return (milliseconds(clock.now - sent), response?.status == 200)
            }
        }
        var latencies: [Double] = []
        latencies.reserveCapacity(count)
        var failures = 0
        for await (latency, succeeded) in group {
            latencies.append(latency)
            if !succeeded { failures += 1 }
        }
        return (latencies, failures)
    }
}

let options = Options(arguments: CommandLine.arguments)
guard let environment = APNsEnvironment(name: "bench", baseURL: options.url) else {
    Options.fail("--url must be https://host[:port]")
}
let credential = APNsCredential(
    id: "bench", teamID: "BENCHTEAM1", keyID: "BENCHKEY01", privateKey: try P256PrivateKey.generate())
let client = try APNsClient(
    configuration: APNsClient.Configuration(
        connectionsPerPool: options.connections, queueCapacity: max(options.connections * options.streams, 1),
        requestTimeout: .seconds(30), maxStreamsPerConnection: options.streams, caFile: options.caFile),
    tokens: InMemoryProviderTokenStore(), logger: Logger(component: "apns-bench", minimumLevel: .warning))
let senders = options.connections * options.streams

let warm = await run(
    count: options.warmup, senders: senders, client: client, credential: credential, environment: environment,
    options: options)
let cpuBefore = cpuSeconds()
let started = ContinuousClock.now
let timed =
    options.rate > 0
    ? await runPaced(
        count: options.count, rate: options.rate, client: client, credential: credential,
        environment: environment, options: options)
    : await run(
        count: options.count, senders: senders, client: client, credential: credential,
        environment: environment, options: options)
let seconds = milliseconds(ContinuousClock.now - started) / 1e3
let cpu = cpuSeconds() - cpuBefore
await client.shutdown(deadline: .seconds(2))

let sorted = timed.latencies.sorted()
func percentile(_ fraction: Double) -> Double {
    sorted.isEmpty ? 0 : sorted[min(Int((Double(sorted.count) * fraction).rounded(.down)), sorted.count - 1)]
}
func rounded(_ value: Double, _ places: Double = 1000) -> Double { (value * places).rounded() / places }
let failures = warm.failures + timed.failures
print(
    "{\"count\":\(options.count),\"failures\":\(failures),\"seconds\":\(rounded(seconds)),"
        + "\"perSecond\":\(Int(Double(options.count) / max(seconds, 1e-9))),"
        + "\"p50Ms\":\(rounded(percentile(0.5))),\"p99Ms\":\(rounded(percentile(0.99))),"
        + "\"cpuSeconds\":\(rounded(cpu)),\"connections\":\(options.connections),\"streams\":\(options.streams),"
        + "\"rate\":\(options.rate),\"peakRSSMiB\":\(rounded(peakRSSMiB(), 10)),"
        + "\"metrics\":{\"connectionsOpened\":\(client.metrics.connectionsOpened),"
        + "\"retriedAfterRefusal\":\(client.metrics.retriedAfterRefusal),\"overloaded\":\(client.metrics.overloaded)}}")
exit(failures == 0 ? 0 : 1)
