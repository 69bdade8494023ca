import CShims
import Foundation
import Synchronization

/// Something with a file descriptor that the event loop watches. Called on the
/// loop's thread only.
public protocol EventLoopSelectable: AnyObject {
    func readable()
    func writable()
    /// Error or hang-up on the descriptor.
    func hangUp()
}

/// One thread running `epoll`: non-blocking sockets, timers and closures
/// submitted from other threads. Everything registered with a loop is touched
/// only on its thread, so connection state machines need no locks.
public final class EventLoop: Sendable {
    public struct Interest: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let read = Interest(rawValue: EPOLLIN.rawValue)
        public static let write = Interest(rawValue: EPOLLOUT.rawValue)
    }

    public struct TimerID: Hashable, Sendable {
        fileprivate let value: UInt64
    }

    public let name: String
    private let epollFD: Int32
    private let wakeFD: Int32
    private let submitted = Mutex<[@Sendable () -> Void]>([])
    private let stopping = Atomic<Bool>(false)
    private let threadID = Mutex<pthread_t?>(nil)
    private let finished = DispatchSemaphore(value: 0)
    /// Loop-thread state; see `LoopState`.
    private let loopState: LoopState

    public init(name: String) {
        self.name = name
        // A write to a socket whose peer has gone must fail with EPIPE, not kill the
        // process: OpenSSL writes with plain send(2), without MSG_NOSIGNAL.
        signal(SIGPIPE, SIG_IGN)
        epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        precondition(epollFD >= 0 && wakeFD >= 0, "epoll/eventfd creation failed: errno \(errno)")
        loopState = LoopState()
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: wakeFD))
        epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event)
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    deinit {
        close(epollFD)
        close(wakeFD)
    }

    /// Whether the caller runs on this loop's thread.
    public var inEventLoop: Bool {
        threadID.withLock { id in id.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Runs `work` on the loop's thread, soon. Safe from any thread; after `shutdown` it never runs.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        // Only the first closure of a batch wakes the loop: until the loop takes the
        // list, the wake-up already written covers the ones queued behind it.
        let wasEmpty = submitted.withLock { list in
            list.append(work)
            return list.count == 1
        }
        guard wasEmpty else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Runs `work` on the loop's thread and returns its result to an async caller.
    public func submit<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            execute { continuation.resume(with: Result { try work() }) }
        }
    }

    // MARK: Loop-thread only

    /// Watches `fd` for `interest`. Loop thread only.
    public func register(_ fd: Int32, interest: Interest, handler: any EventLoopSelectable) {
        assertInEventLoop()
        loopState.handlers[fd] = handler
        var event = epoll_event(events: interest.rawValue | EPOLLRDHUP.rawValue, data: epoll_data_t(fd: fd))
        epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event)
    }

    public func reregister(_ fd: Int32, interest: Interest) {
        assertInEventLoop()
        var event = epoll_event(events: interest.rawValue | EPOLLRDHUP.rawValue, data: epoll_data_t(fd: fd))
        epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event)
    }

    /// Stops watching `fd`; the caller still owns and closes it.
    public func unregister(_ fd: Int32) {
        assertInEventLoop()
        loopState.handlers[fd] = nil
        epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
    }

    /// Runs `work` on the loop thread after `delay`. Loop thread only.
    @discardableResult
    public func schedule(after delay: Duration, _ work: @escaping () -> Void) -> TimerID {
        assertInEventLoop()
        loopState.nextTimer += 1
        let id = TimerID(value: loopState.nextTimer)
        loopState.timers[id] = (ContinuousClock.now.advanced(by: delay), work)
        return id
    }

    public func cancel(_ timer: TimerID) {
        assertInEventLoop()
        loopState.timers[timer] = nil
    }

    /// Stops the loop after the closures already submitted have run. Safe from any
    /// thread but the loop's own; waits for the thread to end.
    public func shutdown() {
        precondition(!inEventLoop, "an event loop cannot wait for itself to stop")
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        execute {}
        finished.wait()
    }

    private func assertInEventLoop() {
        assert(inEventLoop, "\(name): called off the event loop's thread")
    }

    private func run() {
        threadID.withLock { $0 = pthread_self() }
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        while !stopping.load(ordering: .acquiring) {
            let count = epoll_wait(epollFD, &events, Int32(events.count), nextTimeoutMilliseconds())
            if count < 0 && errno != EINTR { break }
            for index in 0..<max(Int(count), 0) {
                let event = events[index]
                let fd = event.data.fd
                if fd == wakeFD {
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, 8)
                    continue
                }
                // A handler may unregister itself (or others) while handling: look it up each time.
                if event.events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
                    loopState.handlers[fd]?.hangUp()
                    continue
                }
                if event.events & (EPOLLIN.rawValue | EPOLLRDHUP.rawValue) != 0 { loopState.handlers[fd]?.readable() }
                if event.events & EPOLLOUT.rawValue != 0 { loopState.handlers[fd]?.writable() }
            }
            runDueTimers()
            // Two lists swapped back and forth, so taking the submitted work allocates nothing.
            var work: [@Sendable () -> Void] = []
            swap(&work, &loopState.spareWork)
            submitted.withLock { swap(&$0, &work) }
            for item in work { item() }
            work.removeAll(keepingCapacity: true)
            swap(&work, &loopState.spareWork)
            runDeferred()
        }
        // Run what was submitted before shutdown, so no continuation is left hanging.
        let remaining = submitted.withLock { list in
            let taken = list
            list.removeAll()
            return taken
        }
        for item in remaining { item() }
        // The descriptors stay open until deinit: `execute` may still be called after
        // the loop stopped (e.g. by a client's deinit), and a write to a closed
        // eventfd number would land in whatever socket reused it.
        finished.signal()
    }

    private func nextTimeoutMilliseconds() -> Int32 {
        guard let next = loopState.timers.values.lazy.map(\.deadline).min() else { return -1 }
        let remaining = ContinuousClock.now.duration(to: next)
        if remaining <= .zero { return 0 }
        let (seconds, attoseconds) = remaining.components
        return Int32(min(seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1, 60_000))
    }

    /// Runs `work` on this loop thread at the end of the current iteration, after
    /// the events and submitted closures it is handling: a way to coalesce many
    /// small actions of one iteration (e.g. one socket write for many requests).
    /// Loop thread only.
    public func deferToEndOfIteration(_ work: @escaping () -> Void) {
        // Not an assert: called from another thread it would race on the loop's state
        // and, with no wake-up written, wait for an unrelated event.
        precondition(inEventLoop, "\(name): deferToEndOfIteration called off the event loop's thread")
        // No wake-up needed: loop-thread code runs inside an iteration, whose end runs this.
        loopState.deferred.append(work)
    }

    private func runDeferred() {
        while !loopState.deferred.isEmpty {
            var work: [() -> Void] = []
            swap(&work, &loopState.spareDeferred)
            swap(&work, &loopState.deferred)
            for item in work { item() }
            work.removeAll(keepingCapacity: true)
            swap(&work, &loopState.spareDeferred)
        }
    }

    private func runDueTimers() {
        guard !loopState.timers.isEmpty else { return }
        let now = ContinuousClock.now
        // Most iterations have nothing due: find that out without building lists.
        guard loopState.timers.values.contains(where: { $0.deadline <= now }) else { return }
        let due = loopState.timers.filter { $0.value.deadline <= now }.sorted { $0.value.deadline < $1.value.deadline }
        for (id, timer) in due {
            loopState.timers[id] = nil
            timer.work()
        }
    }
}

/// State touched only on the loop's thread (handlers, timers). A class so the
/// `Sendable` loop can hold it; the confinement is what makes that safe.
private final class LoopState: @unchecked Sendable {
    var handlers: [Int32: any EventLoopSelectable] = [:]
    var timers: [EventLoop.TimerID: (deadline: ContinuousClock.Instant, work: () -> Void)] = [:]
    var nextTimer: UInt64 = 0
    var deferred: [() -> Void] = []
    /// Emptied lists kept for reuse (see `run` and `runDeferred`).
    var spareWork: [@Sendable () -> Void] = []
    var spareDeferred: [() -> Void] = []
}
