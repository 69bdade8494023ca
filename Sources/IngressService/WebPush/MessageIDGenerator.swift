import Shared
import Synchronization

/// Names accepted pushes: 16 random bytes in base64url (the `Location`'s tail and
/// the rate window's member). The bytes come from `SecureRandom` 4 KB at a time:
/// one `RAND_bytes` per 256 pushes instead of one per push, whose fixed cost (the
/// generator's locks and reseed checks) was most of the ingress's crypto time.
final class MessageIDGenerator: Sendable {
    static let idLength = 16
    static let refillLength = 4096

    private struct Pool {
        var bytes: [UInt8] = []
        var offset = 0
    }

    private let pool = Mutex(Pool())

    func next() -> String {
        // Each id's bytes are handed out once, then skipped: the slice shares the
        // pool's storage (a refill replaces the array, never writes into it).
        let id: ArraySlice<UInt8> = pool.withLock { pool in
            if pool.offset + Self.idLength > pool.bytes.count {
                pool.bytes = SecureRandom.bytes(Self.refillLength)
                pool.offset = 0
            }
            defer { pool.offset += Self.idLength }
            return pool.bytes[pool.offset..<pool.offset + Self.idLength]
        }
        return Base64URL.encode(id)
    }
}
