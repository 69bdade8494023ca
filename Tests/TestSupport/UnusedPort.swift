import Foundation

/// Loopback TCP ports the kernel picks, for servers a test starts as a process and
/// cannot ask for port 0 (a port picked at random may be a connection's local port
/// already), and for listeners of its own.
package enum UnusedPort {
    package struct Failure: Error, CustomStringConvertible {
        package let description: String
    }

    /// A port nobody is bound to when this returns.
    package static func loopback() throws -> Int {
        let (fd, port) = try boundSocket()
        _ = close(fd)
        return port
    }

    /// A TCP socket bound to 127.0.0.1 on a port the kernel picked, and that port;
    /// the caller listens on it (or not) and closes it.
    package static func boundSocket() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = in_addr_t(UInt32(INADDR_LOOPBACK).bigEndian)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            let failure = Failure(description: "bind: errno \(errno)")
            _ = close(fd)
            throw failure
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}
