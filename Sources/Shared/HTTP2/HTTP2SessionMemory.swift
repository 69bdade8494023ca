import CNGHTTP2
import Foundation

/// The memory of one nghttp2 session, recycled per size class: the per-session
/// pool nghttp2's `nghttp2_mem` is meant for.
///
/// nghttp2 allocates for every stream and frame: the stream, its outbound items, a
/// copy of the request's header fields, decoded header values. A client that opens
/// a batch's hundreds of streams at once, and frees their memory together once the
/// frames are sent or the answers read, overflows glibc's per-thread cache (seven
/// blocks per size), so most of those calls took the arena's slow paths. Here a
/// freed block goes on its size class's free list and the next request of that
/// class takes it back. Blocks larger than the largest class, and blocks freed
/// while their class already keeps its share, go back to `free`.
///
/// Loop-confined like the session: nghttp2 calls it only from inside the
/// session's functions. It must outlive the session (the connection deletes the
/// session first, then drops this).
final class HTTP2SessionMemory {
    /// Classes of 64, 128, … 8192-byte blocks; a class's blocks serve requests up to its size.
    private static let classCount = 8
    private static let smallestBlockShift = 6
    /// Marks a block larger than every class (allocated to its exact size).
    private static let unclassed = classCount
    /// Each block starts with its class, which keeps the 16-byte alignment malloc gives.
    private static let headerSize = 16
    /// Free blocks kept per class, in bytes: a burst of streams reuses them, an idle
    /// connection holds at most this much per class.
    private static let bytesKeptPerClass = 512 * 1024

    /// Per class: the first free block (each holds the next where its data would be), and how many.
    private let freeBlocks = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: classCount)
    private let freeCounts = UnsafeMutablePointer<Int>.allocate(capacity: classCount)

    init() {
        freeBlocks.initialize(repeating: nil, count: Self.classCount)
        freeCounts.initialize(repeating: 0, count: Self.classCount)
    }

    deinit {
        for sizeClass in 0..<Self.classCount {
            while let block = freeBlocks[sizeClass] {
                freeBlocks[sizeClass] = Self.next(of: block)
                free(block)
            }
        }
        freeBlocks.deallocate()
        freeCounts.deallocate()
    }

    /// The allocator to hand to `nghttp2_session_*_new3` (which copies it). The
    /// pointer to this object is unretained: the connection keeps it alive.
    var allocator: nghttp2_mem {
        nghttp2_mem(
            mem_user_data: Unmanaged.passUnretained(self).toOpaque(), malloc: sessionMalloc, free: sessionFree,
            calloc: sessionCalloc, realloc: sessionRealloc)
    }

    func allocate(_ size: Int) -> UnsafeMutableRawPointer? {
        let sizeClass = Self.sizeClass(of: size)
        if sizeClass != Self.unclassed, let block = freeBlocks[sizeClass] {
            freeBlocks[sizeClass] = Self.next(of: block)
            freeCounts[sizeClass] -= 1
            return block + Self.headerSize
        }
        let capacity = sizeClass == Self.unclassed ? size : Self.blockSize(of: sizeClass)
        guard let block = malloc(Self.headerSize + capacity) else { return nil }
        block.storeBytes(of: sizeClass, as: Int.self)
        return block + Self.headerSize
    }

    func deallocate(_ pointer: UnsafeMutableRawPointer?) {
        guard let pointer else { return }
        let block = pointer - Self.headerSize
        let sizeClass = block.load(as: Int.self)
        guard sizeClass != Self.unclassed,
            freeCounts[sizeClass] < Self.bytesKeptPerClass / Self.blockSize(of: sizeClass)
        else { return free(block) }
        pointer.storeBytes(of: freeBlocks[sizeClass], as: UnsafeMutableRawPointer?.self)
        freeBlocks[sizeClass] = block
        freeCounts[sizeClass] += 1
    }

    /// `realloc`'s contract: the contents up to the smaller size are kept; a nil
    /// pointer allocates; size 0 frees and returns nil.
    func reallocate(_ pointer: UnsafeMutableRawPointer?, to size: Int) -> UnsafeMutableRawPointer? {
        guard let pointer else { return allocate(size) }
        guard size > 0 else {
            deallocate(pointer)
            return nil
        }
        let block = pointer - Self.headerSize
        let sizeClass = block.load(as: Int.self)
        if sizeClass == Self.unclassed {
            // Stays unclassed (whatever its new size), so it always goes back to `free`.
            return realloc(block, Self.headerSize + size).map { $0 + Self.headerSize }
        }
        let capacity = Self.blockSize(of: sizeClass)
        if size <= capacity { return pointer }
        guard let moved = allocate(size) else { return nil }
        moved.copyMemory(from: pointer, byteCount: capacity)
        deallocate(pointer)
        return moved
    }

    /// The smallest class whose blocks hold `size` bytes, or `unclassed`.
    private static func sizeClass(of size: Int) -> Int {
        guard size > 1 << smallestBlockShift else { return 0 }
        // Bits needed for size - 1 = log2 of the power of two that holds `size`.
        let shift = Int.bitWidth - (size - 1).leadingZeroBitCount
        return min(shift - smallestBlockShift, unclassed)
    }

    private static func blockSize(of sizeClass: Int) -> Int { 1 << (sizeClass + smallestBlockShift) }

    private static func next(of block: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        (block + headerSize).load(as: UnsafeMutableRawPointer?.self)
    }
}

// MARK: - nghttp2_mem functions (mem_user_data is the unretained HTTP2SessionMemory)

private func withMemory<Result>(
    _ userData: UnsafeMutableRawPointer?, _ body: (HTTP2SessionMemory) -> Result
) -> Result {
    Unmanaged<HTTP2SessionMemory>.fromOpaque(userData!)._withUnsafeGuaranteedRef(body)
}

private let sessionMalloc: nghttp2_malloc = { size, userData in
    withMemory(userData) { $0.allocate(size) }
}

private let sessionFree: nghttp2_free = { pointer, userData in
    withMemory(userData) { $0.deallocate(pointer) }
}

private let sessionCalloc: nghttp2_calloc = { count, size, userData in
    let (total, overflow) = count.multipliedReportingOverflow(by: size)
    guard !overflow, let pointer = withMemory(userData, { $0.allocate(total) }) else { return nil }
    pointer.initializeMemory(as: UInt8.self, repeating: 0, count: total)
    return pointer
}

private let sessionRealloc: nghttp2_realloc = { pointer, size, userData in
    withMemory(userData) { $0.reallocate(pointer, to: size) }
}
