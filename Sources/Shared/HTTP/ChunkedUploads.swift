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
/// times a connection from its last read).
///
/// Why @unchecked Sendable is safe: touched only on the driver's loop thread (the
/// server's callbacks run there, inside `MHD_run`).
final class ChunkedUploads: @unchecked Sendable {
    private struct Upload {
        let connection: OpaquePointer
        let context: HTTPRequestContext
    }

    private var uploads: [ObjectIdentifier: Upload] = [:]
    /// How long an upload may deliver nothing before a busy loop closes it.
    static let stallAllowance: Duration = .seconds(1)

    func began(_ context: HTTPRequestContext, on connection: OpaquePointer) {
        uploads[ObjectIdentifier(context)] = Upload(connection: connection, context: context)
    }

    /// Its body was handed over, or its request ended.
    func ended(_ context: HTTPRequestContext) {
        uploads.removeValue(forKey: ObjectIdentifier(context))
    }

    /// Gives each upload that delivered nothing for `stallAllowance` a one-second
    /// timeout; returns how many.
    func timeOutStalled(now: ContinuousClock.Instant = .now) -> Int {
        var count = 0
        for (key, upload) in uploads where now - upload.context.lastBodyAt >= Self.stallAllowance {
            pg_shim_mhd_set_connection_timeout(upload.connection, 1)
            uploads.removeValue(forKey: key)
            count += 1
        }
        return count
    }
}
