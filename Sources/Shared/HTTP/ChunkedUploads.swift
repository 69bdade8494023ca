import CShims

/// The chunked request bodies being received on a daemon that `HTTPDaemonDriver`
/// runs, so that one stuck inside libmicrohttpd can be closed.
///
/// libmicrohttpd 0.9.75 without threads neither refuses nor reads a chunk-size line
/// longer than the connection's memory: it asks to run again at once, and walks the
/// connection on every run, until the connection times out (a core busy for 30 s per
/// such request, and more with other traffic). When the driver sees that busy loop,
/// each upload that has delivered nothing for a second gets a timeout of a second:
/// the stuck one, which libmicrohttpd last read from when its memory filled, is
/// closed at the next run; one whose client is still sending is not (libmicrohttpd
/// times a connection from its last read), unless it pauses for over a second
/// meanwhile. (A longer timeout would spare such pauses, but it never ends the stuck
/// one: libmicrohttpd counts each of the loop's runs, a second apart once put off,
/// as activity on it.) The connection's own timeout is put back once the upload's
/// body is in, or its request completes without it (answered early), so the wait for
/// the next request on it is not held to the short one; any other end of a request
/// closes its connection.
///
/// Why @unchecked Sendable is safe: touched only on the driver's loop thread (the
/// server's callbacks run there, inside `MHD_run`).
final class ChunkedUploads: @unchecked Sendable {
    private struct Upload {
        let connection: OpaquePointer
        let context: HTTPRequestContext
    }

    private var uploads: [ObjectIdentifier: Upload] = [:]
    /// Connections given the short timeout, until their request is done or they close.
    private var shortened: Set<OpaquePointer> = []
    /// How long an upload may deliver nothing before a busy loop shortens its timeout.
    static let stallAllowance: Duration = .seconds(1)
    /// The shortened timeout: how long such an upload's client may then pause.
    static let stalledTimeoutSeconds: UInt32 = 1

    /// Whether a connection may be stuck: a chunked body is being received, or one
    /// given the short timeout has not closed yet (until it does, the driver must
    /// keep putting off the runs it asks for, or they would keep it alive).
    var mayBeStuck: Bool { !uploads.isEmpty || !shortened.isEmpty }

    func began(_ context: HTTPRequestContext, on connection: OpaquePointer) {
        uploads[ObjectIdentifier(context)] = Upload(connection: connection, context: context)
    }

    /// Its body was handed over, or its request ended.
    func ended(_ context: HTTPRequestContext) {
        uploads.removeValue(forKey: ObjectIdentifier(context))
    }

    /// Gives each upload that delivered nothing for `stallAllowance` the timeout of
    /// `stalledTimeoutSeconds`; returns how many.
    func timeOutStalled(now: ContinuousClock.Instant = .now) -> Int {
        var count = 0
        for (key, upload) in uploads where now - upload.context.lastBodyAt >= Self.stallAllowance {
            pg_shim_mhd_set_connection_timeout(upload.connection, Self.stalledTimeoutSeconds)
            shortened.insert(upload.connection)
            uploads.removeValue(forKey: key)
            count += 1
        }
        return count
    }

    /// If `connection`'s timeout was shortened, it gets `timeoutSeconds` (the
    /// server's) back. Called only before libmicrohttpd cleans the connection up (it
    /// moves it between its timeout lists, which the cleanup then leaves).
    func restoreTimeout(of connection: OpaquePointer, timeoutSeconds: Int) {
        guard !shortened.isEmpty, shortened.remove(connection) != nil else { return }
        pg_shim_mhd_set_connection_timeout(connection, UInt32(clamping: timeoutSeconds))
    }

    /// `connection` closed: its pointer may name another one next.
    func connectionClosed(_ connection: OpaquePointer) {
        if !shortened.isEmpty { shortened.remove(connection) }
    }
}
