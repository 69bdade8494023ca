import Glibc
import Shared

/// The accepted notifications kept for the control API: the newest `capacity`,
/// oldest first.
///
/// One is recorded per notification and read rarely, so a recording's request
/// (`RecordedRequest`'s packed bytes) is copied into large chunks of memory that
/// the ring reuses in order: a chunk whose last recording is dropped becomes the
/// spare the next chunk is taken from, so once the ring is full recording
/// allocates and frees nothing. Reading makes `RecordedNotification`s with their
/// own copies.
struct RecordingRing: Sendable {
    /// A recording's own fields.
    struct Metadata: Sendable {
        let sequence: Int
        /// Microseconds since 1970.
        let receivedAtMicroseconds: Int64
        let responseID: APNsID
        let teamID: String
        let keyID: String
        let connectionID: Int
    }

    private struct Entry: Sendable {
        let metadata: Metadata
        /// The serial number of the chunk holding the request, and where in it.
        let chunk: Int
        let bytes: Range<Int>
        let payloadStart: Int
    }

    /// Memory for packed requests, filled from the start. Touched only by its
    /// ring's owner (under `SimulatorState`'s lock), which makes it Sendable.
    private final class Chunk: @unchecked Sendable {
        let memory: UnsafeMutableBufferPointer<UInt8>
        var used = 0

        /// Mapped with its pages populated: one system call, rather than a page
        /// fault for every 4 KB a request later writes.
        init(size: Int) {
            let address = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0)
            guard let address, address != UnsafeMutableRawPointer(bitPattern: -1) else {
                fatalError("cannot map \(size) bytes for recordings: \(String(cString: strerror(errno)))")
            }
            memory = UnsafeMutableBufferPointer(start: address.bindMemory(to: UInt8.self, capacity: size), count: size)
        }

        deinit { munmap(memory.baseAddress, memory.count) }
    }

    /// A chunk holds about a thousand usual recordings.
    static let chunkSize = 1 << 20

    let capacity: Int
    private var entries: [Entry] = []
    /// The oldest entry once the ring is full.
    private var start = 0
    /// Chunks holding recordings, oldest first; `chunks[0]` has serial number `firstChunk`.
    private var chunks: [Chunk] = []
    private var firstChunk = 0
    private var spare: Chunk?

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { entries.count }

    /// Records a request (`capacity` must not be 0); returns true when the oldest
    /// recording was dropped to make room.
    mutating func append(_ metadata: Metadata, headers: [HTTP2Header], payload: [UInt8]) -> Bool {
        let size = RecordedRequest.packedSize(headers: headers, payload: payload)
        let chunk = chunkWithRoom(for: size)
        let range = chunk.used..<chunk.used + size
        let payloadStart = RecordedRequest.pack(
            headers: headers, payload: payload,
            into: UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: chunk.memory[range])))
        chunk.used += size
        let entry = Entry(
            metadata: metadata, chunk: firstChunk + chunks.count - 1, bytes: range, payloadStart: payloadStart)
        guard entries.count == capacity else {
            entries.append(entry)
            return false
        }
        entries[start] = entry
        start = (start + 1) % capacity
        recycleChunks(before: entries[start].chunk)
        return true
    }

    /// Recordings in order, optionally only those after `sequence` and for one
    /// device token (any case), at most `limit`.
    func recordings(after sequence: Int, deviceToken: String?, limit: Int) -> [RecordedNotification] {
        let wanted = deviceToken?.lowercased()
        var result: [RecordedNotification] = []
        for offset in entries.indices {
            let entry = entries[(start + offset) % entries.count]
            guard entry.metadata.sequence > sequence else { continue }
            let request = RecordedRequest.Packed(
                bytes: UnsafeRawBufferPointer(
                    UnsafeBufferPointer(rebasing: chunks[entry.chunk - firstChunk].memory[entry.bytes])),
                payloadStart: entry.payloadStart)
            if let wanted, RecordedNotification.deviceToken(inPath: request.value(of: ":path")).lowercased() != wanted {
                continue
            }
            result.append(RecordedNotification(entry.metadata, request: RecordedRequest(copying: request)))
            if result.count >= limit { break }
        }
        return result
    }

    mutating func removeAll() {
        entries = []
        start = 0
        firstChunk += chunks.count
        chunks = []
    }

    /// The newest chunk if `size` more bytes fit, else a spare or new one.
    private mutating func chunkWithRoom(for size: Int) -> Chunk {
        if let last = chunks.last, last.memory.count - last.used >= size { return last }
        let chunk: Chunk
        if let spare, spare.memory.count >= size {
            chunk = spare
            self.spare = nil
        } else {
            chunk = Chunk(size: max(Self.chunkSize, size))
        }
        chunk.used = 0
        chunks.append(chunk)
        return chunk
    }

    /// Chunks older than `serial` hold no recording any more: one is kept as a spare.
    private mutating func recycleChunks(before serial: Int) {
        while firstChunk < serial {
            spare = chunks.removeFirst()
            firstChunk += 1
        }
    }
}
