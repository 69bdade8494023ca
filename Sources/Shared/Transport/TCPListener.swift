import CShims
import Foundation

/// A listening TCP socket on an event loop; hands each accepted socket to
/// `onAccept` (on the loop's thread), which then owns it. Loop-confined.
public final class TCPListener: EventLoopSelectable {
    public let loop: EventLoop
    public let port: Int
    private let fd: Int32
    private let onAccept: (Int32) -> Void
    private var isOpen = true

    /// Binds and listens; call on `loop`.
    public init(address: ListenAddress, loop: EventLoop, onAccept: @escaping (Int32) -> Void) throws(TLSError) {
        guard let host = CIDR.parseAddress(address.host) else {
            throw TLSError(.configuration, "listen host must be an IP address: \(address.host)")
        }
        let family = host.count == 4 ? AF_INET : AF_INET6
        let fd = socket(
            family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TLSError(.configuration, "socket: \(String(cString: strerror(errno)))") }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var storage = sockaddr_storage()
        let length: Int
        if family == AF_INET {
            var v4 = sockaddr_in()
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = in_port_t(UInt16(address.port).bigEndian)
            withUnsafeMutableBytes(of: &v4.sin_addr) { $0.copyBytes(from: host) }
            withUnsafeMutableBytes(of: &storage) { $0.copyBytes(from: withUnsafeBytes(of: v4) { Array($0) }) }
            length = MemoryLayout<sockaddr_in>.size
        } else {
            var v6 = sockaddr_in6()
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = in_port_t(UInt16(address.port).bigEndian)
            withUnsafeMutableBytes(of: &v6.sin6_addr) { $0.copyBytes(from: host) }
            withUnsafeMutableBytes(of: &storage) { $0.copyBytes(from: withUnsafeBytes(of: v6) { Array($0) }) }
            length = MemoryLayout<sockaddr_in6>.size
        }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(length)) }
        }
        guard bound == 0, listen(fd, 1024) == 0 else {
            let reason = String(cString: strerror(errno))
            Foundation.close(fd)
            throw TLSError(.configuration, "cannot listen on \(address): \(reason)")
        }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
        }
        let portBigEndian = withUnsafeBytes(of: &actual) { $0.load(fromByteOffset: 2, as: UInt16.self) }
        self.port = Int(UInt16(bigEndian: portBigEndian))
        self.fd = fd
        self.loop = loop
        self.onAccept = onAccept
        loop.register(fd, interest: .read, handler: self)
    }

    deinit { close() }

    public func close() {
        guard isOpen else { return }
        isOpen = false
        loop.unregister(fd)
        Foundation.close(fd)
    }

    public func readable() {
        while isOpen {
            let client = pg_shim_accept_nonblocking(fd)
            guard client >= 0 else { return }  // EAGAIN, or a transient error: wait for the next event
            onAccept(client)
        }
    }

    public func writable() {}
    public func hangUp() {}
}
