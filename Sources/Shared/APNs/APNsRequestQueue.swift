/// The requests of a pool waiting for a free stream: first in, first out, with
/// room for `capacity` new requests. Requests coming back for a retry (GOAWAY,
/// REFUSED_STREAM) go ahead of new ones and are never refused: they were
/// accepted once already. Loop-confined, like the pool that owns it.
struct APNsRequestQueue<Element> {
    let capacity: Int
    private var retries = FIFOQueue<Element>()
    private var waiting = FIFOQueue<Element>()

    init(capacity: Int) {
        precondition(capacity >= 0)
        self.capacity = capacity
    }

    var count: Int { retries.count + waiting.count }
    var isEmpty: Bool { count == 0 }
    /// New requests are refused (`append` returns false).
    var isFull: Bool { waiting.count >= capacity }

    /// Adds a new request at the back; false (and nothing added) when full.
    mutating func append(_ element: Element) -> Bool {
        guard !isFull else { return false }
        waiting.append(element)
        return true
    }

    /// Adds a request to retry, ahead of every new request (after earlier retries).
    mutating func requeue(_ element: Element) {
        retries.append(element)
    }

    mutating func popFirst() -> Element? {
        retries.popFirst() ?? waiting.popFirst()
    }

    /// Removes and returns, in queue order, every element matching `predicate`.
    mutating func removeAll(where predicate: (Element) -> Bool) -> [Element] {
        retries.removeAll(where: predicate) + waiting.removeAll(where: predicate)
    }

    /// Removes and returns everything, in queue order.
    mutating func removeAll() -> [Element] { retries.removeAll() + waiting.removeAll() }
}
