/// The requests of a pool waiting for a free stream: first in, first out, with
/// room for `capacity` new requests. Requests coming back for a retry (GOAWAY,
/// REFUSED_STREAM) go ahead of new ones and are never refused: they were
/// accepted once already. Loop-confined, like the pool that owns it.
struct APNsRequestQueue<Element> {
    let capacity: Int
    private var retries: [Element] = []
    private var retryHead = 0
    private var waiting: [Element] = []
    private var waitingHead = 0

    init(capacity: Int) {
        precondition(capacity >= 0)
        self.capacity = capacity
    }

    var count: Int { retryCount + waitingCount }
    var isEmpty: Bool { count == 0 }
    /// New requests are refused (`append` returns false).
    var isFull: Bool { waitingCount >= capacity }

    private var retryCount: Int { retries.count - retryHead }
    private var waitingCount: Int { waiting.count - waitingHead }

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
        if retryHead < retries.count {
            return Self.take(from: &retries, head: &retryHead)
        }
        if waitingHead < waiting.count {
            return Self.take(from: &waiting, head: &waitingHead)
        }
        return nil
    }

    /// Removes and returns, in queue order, every element matching `predicate`.
    mutating func removeAll(where predicate: (Element) -> Bool) -> [Element] {
        var removed: [Element] = []
        Self.filter(&retries, head: &retryHead, into: &removed, predicate)
        Self.filter(&waiting, head: &waitingHead, into: &removed, predicate)
        return removed
    }

    /// Removes and returns everything, in queue order.
    mutating func removeAll() -> [Element] { removeAll { _ in true } }

    private static func filter(
        _ list: inout [Element], head: inout Int, into removed: inout [Element], _ predicate: (Element) -> Bool
    ) {
        var kept: [Element] = []
        for element in list[head...] {
            if predicate(element) { removed.append(element) } else { kept.append(element) }
        }
        list = kept
        head = 0
    }

    /// Takes the element at `head`; compacts once half the array is consumed, so
    /// popping stays amortised O(1).
    private static func take(from list: inout [Element], head: inout Int) -> Element {
        let element = list[head]
        head += 1
        if head == list.count {
            list.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= list.count {
            list.removeFirst(head)
            head = 0
        }
        return element
    }
}
