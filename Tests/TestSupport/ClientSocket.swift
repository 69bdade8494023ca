import Foundation

/// Blocking TCP client sockets (IPv4, or IPv6 for a host with a colon), for the tests' own HTTP clients
/// (`RawHTTPClient`, kept-alive and slow clients). Use them off the concurrency pool.
package enum ClientSocket {
    /// A connected socket, with a receive timeout so a silent server cannot hang a test.
    package static func connect(host: String = "127.0.0.1", port: Int, receiveTimeoutSeconds: Int = 15) throws
        -> Int32
    {
        let family = host.contains(":") ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawHTTPClient.Failure(description: "socket failed") }
        var timeout = timeval(tv_sec: receiveTimeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected: Int32
        if family == AF_INET6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(port).bigEndian)
            inet_pton(AF_INET6, host, &address.sin6_addr)
            connected = connect(fd, to: address)
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            inet_pton(AF_INET, host, &address.sin_addr)
            connected = connect(fd, to: address)
        }
        guard connected == 0 else {
            let error = errno
            close(fd)
            throw RawHTTPClient.Failure(description: "connect failed: errno \(error)")
        }
        return fd
    }

    /// `connect(2)` to a `sockaddr_in` or `sockaddr_in6`.
    private static func connect<Address>(_ fd: Int32, to address: Address) -> Int32 {
        withUnsafePointer(to: address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<Address>.size))
            }
        }
    }

    /// Sends all of `bytes`; false if the peer stopped taking them (it may have
    /// answered and closed before reading everything).
    @discardableResult
    package static func send(_ bytes: some Collection<UInt8>, on fd: Int32) -> Bool {
        let bytes = Array(bytes)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// Everything the peer sends until it closes (or the receive timeout).
    package static func receiveAll(on fd: Int32) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { return received }
            received += buffer[0..<count]
        }
    }
}
