import CMicroHTTPD
import CShims

/// Runs a libmicrohttpd daemon started without threads of its own on an `EventLoop`:
/// the loop watches the daemon's epoll descriptor and calls `MHD_run` when it is
/// readable, when libmicrohttpd says it has work at hand, and when the next
/// connection timeout is due.
///
/// A handler whose answer comes from the same loop (a `RedisMultiplexer` sharing
/// it) then parses, submits, reads the reply and writes the response on one thread:
/// no thread wake-up or hand-off per request. Without threads libmicrohttpd has no
/// inter-thread channel, so whoever resumes a connection calls `connectionResumed()`.
///
/// Why @unchecked Sendable is safe: `daemon` and `epollFD` are written once by
/// `start(_:)` before the loop first sees the driver; after that, every property is
/// touched only on `loop`'s thread.
final class HTTPDaemonDriver: EventLoopSelectable, @unchecked Sendable {
    let loop: EventLoop
    private var daemon: OpaquePointer?
    private var epollFD: Int32 = -1
    private var stopped = false
    private var runScheduled = false
    private var timer: (id: EventLoop.TimerID, deadline: ContinuousClock.Instant)?
    /// The longest the daemon goes without a run, in milliseconds.
    static let longestWait: UInt64 = 1000
    /// Whether the run in progress called any of the server's callbacks (`noteProgress`).
    private var progressed = false
    /// Runs in a row that only the timer asked for (libmicrohttpd's "at once") and that
    /// called no callback. libmicrohttpd 0.9.75 without threads busy-waits on a
    /// connection whose read buffer is full of what it cannot hand over (a chunk-size
    /// line longer than the connection's memory), asking to run at once until that
    /// connection times out: one such request kept a core busy for 30 s. Past a few
    /// such runs the next is put off, doubling up to `longestWait`; readiness and
    /// resumed connections still run the daemon at once, so others are served. Up to
    /// `longestWait` only while a connection may be stuck that way
    /// (`ChunkedUploads.mayBeStuck`), otherwise up to `otherBackoffCeiling` (ms): a large
    /// head is also read over runs asked for at once that call no callback, and
    /// putting those off by up to a second answered a 20 KB head 27 s late, while any
    /// other such loop is still held to a few hundred runs a second.
    private var fruitlessRuns = 0
    static let fruitlessRunsTolerated = 8
    static let otherBackoffCeiling: UInt64 = 4
    /// When the last `busyRunsPerSecond` such runs happened, oldest at
    /// `recentFruitlessOldest` once full (not reset by other connections' progress):
    /// all of them within a second, wherever that second starts, and the stalled
    /// chunked uploads are timed out (`ChunkedUploads`), which ends the busy loop
    /// rather than slowing it. (Counted per calendar second, a streak split by a
    /// second's start could go unseen.)
    private var recentFruitless: [ContinuousClock.Instant] = []
    private var recentFruitlessOldest = 0
    static let busyRunsPerSecond = 16
    /// A busy loop was seen and every timer run since was fruitless: each such run
    /// times out the uploads stalled by then, since the stuck one may have been too
    /// young to count as stalled when the loop was seen (and the backoff then spaces
    /// the runs too far apart to see it again).
    private var inBusyLoop = false
    /// The chunked bodies being received, one of which may cause the busy loop.
    let uploads = ChunkedUploads()
    private let log: ThrottledLog?
    /// Runs of the daemon so far (tests watch it for a busy loop).
    private(set) var runs = 0

    init(loop: EventLoop, log: ThrottledLog? = nil) {
        self.loop = loop
        self.log = log
    }

    /// Starts watching `daemon` (started without threads, epoll). Once, any thread.
    func start(_ daemon: OpaquePointer) {
        self.daemon = daemon
        epollFD = pg_shim_mhd_epoll_fd(daemon)
        loop.execute { [self] in
            loop.register(epollFD, interest: .read, handler: self)
            run()
        }
    }

    /// Runs the daemon soon, after a connection was resumed (its response queued on
    /// that run). Any thread; on the loop's own, the run comes at the end of the
    /// iteration, once for every connection resumed in it.
    func connectionResumed() {
        if loop.inEventLoop {
            scheduleRun()
        } else {
            loop.execute { [self] in scheduleRun() }
        }
    }

    private func scheduleRun() {
        guard !runScheduled else { return }
        runScheduled = true
        loop.deferToEndOfIteration { [self] in
            runScheduled = false
            run()
        }
    }

    /// `MHD_quiesce_daemon` on the loop's thread (it edits the daemon's epoll set):
    /// the listening socket, now the caller's to close, or -1.
    func quiesce() async -> Int32 {
        (try? await loop.submit { [self] in
            guard !stopped, let daemon else { return -1 }
            return MHD_quiesce_daemon(daemon)
        }) ?? -1
    }

    /// Stops watching and stops the daemon (closing every connection) on the loop's
    /// thread, where no `MHD_run` can be in progress.
    func stop() async {
        _ = try? await loop.submit { [self] in
            guard !stopped, let daemon else { return }
            stopped = true
            loop.unregister(epollFD)
            if let timer { loop.cancel(timer.id) }
            timer = nil
            MHD_stop_daemon(daemon)
        }
    }

    func readable() { run() }
    func writable() {}
    func hangUp() { run() }

    /// Records a fruitless run at `now`; whether it makes `busyRunsPerSecond` of them
    /// within a second (then the count starts again).
    private func isBusyLoop(now: ContinuousClock.Instant) -> Bool {
        if recentFruitless.count < Self.busyRunsPerSecond {
            recentFruitless.append(now)
        } else {
            recentFruitless[recentFruitlessOldest] = now
            recentFruitlessOldest = (recentFruitlessOldest + 1) % Self.busyRunsPerSecond
        }
        guard recentFruitless.count == Self.busyRunsPerSecond,
            now - recentFruitless[recentFruitlessOldest] < .seconds(1)
        else { return false }
        recentFruitless.removeAll(keepingCapacity: true)
        recentFruitlessOldest = 0
        return true
    }

    /// A callback of the server ran (on the loop's thread, within a run): the run did
    /// something.
    func noteProgress() { progressed = true }

    /// One pass of the daemon: accepts, reads, calls the access handler, writes,
    /// expires idle connections; then arranges the next pass it asks for.
    private func run(byTimer: Bool = false) {
        guard !stopped, let daemon else { return }
        progressed = false
        runs += 1
        _ = MHD_run(daemon)
        // The next run: at once (0) when data already read or a resumed connection
        // waits, which no new event would announce (the timer then runs after the
        // loop's next, non-blocking, poll, so Redis replies are read in between);
        // otherwise at the next connection timeout, but within a second, since
        // libmicrohttpd also re-arms its listening socket (taken out at the connection
        // limit) only when it runs. Deadlines only move later while a timer waits, so
        // it is replaced only when an earlier one is needed (or it has fired).
        var milliseconds: UInt64 = 0
        if MHD_get_timeout(daemon, &milliseconds) != .YES { milliseconds = Self.longestWait }
        let now = ContinuousClock.now
        if byTimer {
            let fruitless = !progressed && milliseconds == 0
            fruitlessRuns = fruitless ? fruitlessRuns + 1 : 0
            inBusyLoop = fruitless && (inBusyLoop || isBusyLoop(now: now))
            if inBusyLoop {
                let stalled = uploads.timeOutStalled(now: now)
                if stalled > 0 {
                    log?.warning(
                        "closing chunked uploads stuck in libmicrohttpd (a chunk-size line longer than the"
                            + " connection's memory)", metadata: ["connections": "\(stalled)"])
                }
            }
        }
        if fruitlessRuns > Self.fruitlessRunsTolerated {
            let shift = min(fruitlessRuns - Self.fruitlessRunsTolerated, 10)
            let ceiling = uploads.mayBeStuck ? Self.longestWait : Self.otherBackoffCeiling
            milliseconds = max(milliseconds, min(UInt64(1) << UInt64(shift), ceiling))
        }
        let deadline = now.advanced(by: .milliseconds(min(milliseconds, Self.longestWait)))
        if let timer, timer.deadline <= deadline { return }
        if let timer { loop.cancel(timer.id) }
        let id = loop.schedule(after: now.duration(to: deadline)) { [self] in
            timer = nil
            run(byTimer: true)
        }
        timer = (id, deadline)
    }
}
