import Dispatch
import Foundation

/// Waits for SIGTERM or SIGINT: the start of a graceful shutdown.
public enum ShutdownSignal {
    /// Returns the signal number once SIGTERM or SIGINT arrives. The default
    /// handlers are replaced for the life of the process, so a second signal
    /// during shutdown does not kill it mid-drain.
    public static func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            let queue = DispatchQueue(label: "pushgate.signals")
            let fired = ManagedFlag()
            var sources: [any DispatchSourceSignal] = []
            for number in [SIGTERM, SIGINT] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler {
                    if fired.setOnce() { continuation.resume(returning: number) }
                }
                source.resume()
                sources.append(source)
            }
            // The sources must outlive this scope; they live as long as the process.
            SignalSources.keep(sources)
        }
    }
}

extension ShutdownSignal {
    /// Ignores SIGHUP for the life of the process, first thing in `main`: its default
    /// would end the process undrained (a closed terminal, an operator expecting a
    /// reload), and there is no configuration to reload.
    public static func ignoreHangUp() {
        signal(SIGHUP, SIG_IGN)
    }
}

/// Keeps signal sources alive; touched only on the signal queue set-up path.
private enum SignalSources {
    nonisolated(unsafe) static var retained: [any DispatchSourceSignal] = []
    static func keep(_ sources: [any DispatchSourceSignal]) { retained += sources }
}

/// A flag that can be set once, from any thread.
final class ManagedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var isSet = false

    /// True for the first caller only.
    func setOnce() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if isSet { return false }
        isSet = true
        return true
    }
}
