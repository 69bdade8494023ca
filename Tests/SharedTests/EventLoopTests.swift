import Foundation
import Shared
import Testing

@Suite struct EventLoopTests {
    @Test func submittedWorkRunsOnTheLoopThread() async throws {
        let loop = EventLoop(name: "test-loop")
        defer { loop.shutdown() }
        let ranOnLoop = try await loop.submit { loop.inEventLoop }
        #expect(ranOnLoop)
        #expect(!loop.inEventLoop)
    }

    /// Work handed to a stopped loop must not touch a descriptor the loop no
    /// longer uses: a wake-up written to a closed eventfd number would land in
    /// whatever socket the process opened next (it once corrupted Redis replies).
    @Test func workSubmittedAfterShutdownWritesToNoOtherSocket() throws {
        for _ in 0..<20 {
            let loop = EventLoop(name: "test-loop")
            loop.shutdown()
            var pair: [Int32] = [0, 0]
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
            defer {
                close(pair[0])
                close(pair[1])
            }
            loop.execute {}
            for fd in pair {
                var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                #expect(poll(&descriptor, 1, 0) == 0, "the stopped loop wrote into descriptor \(fd)")
            }
        }
    }
}
