extension RedisMultiplexer {
    /// The start shared by commands that take any number of items after it — a script
    /// run over a list, `EVALSHA <sha> <numkeys> <keys…> <shared arguments…>` — whose
    /// reply is an array with one element per item, in order.
    ///
    /// Items of one head (the same object) submitted together, while earlier commands
    /// are on the wire, leave as one command of up to `maximumItems` items. For a
    /// script that is one run instead of several: Redis's fixed cost per command and
    /// per script run (argument tables, the AOF's `MULTI`/`EXEC`) is paid once.
    public final class BatchHead: Sendable {
        /// The head's arguments, written as a command of their own (the array header is
        /// rewritten when items are appended).
        let arguments: EncodedRedisCommand
        let argumentCount: Int
        public let maximumItems: Int

        /// `body` writes exactly `argumentCount` arguments, the command's name first.
        public init(
            argumentCount: Int, script: RedisScript?, maximumItems: Int,
            _ body: (inout EncodedRedisCommand.Writer) -> Void
        ) {
            precondition(maximumItems > 0, "a batch holds at least one item")
            arguments = EncodedRedisCommand(argumentCount: argumentCount, script: script, body)
            self.argumentCount = argumentCount
            self.maximumItems = maximumItems
        }
    }

    /// One item of a `BatchHead`'s command: its own arguments, and the reply element
    /// that answers it.
    public struct BatchItem: Sendable {
        public let head: BatchHead
        let arguments: EncodedRedisCommand
        let argumentCount: Int

        /// `body` writes exactly `argumentCount` arguments.
        public init(
            head: BatchHead, argumentCount: Int, capacity: Int = 256, _ body: (inout EncodedRedisCommand.Writer) -> Void
        ) {
            self.head = head
            arguments = EncodedRedisCommand(argumentCount: argumentCount, capacity: capacity, body)
            self.argumentCount = argumentCount
        }

        /// The item alone: its head's command with this one item.
        public var command: EncodedRedisCommand { RedisMultiplexer.command(of: CollectionOfOne(self)) }
    }

    /// `items` (all of one head) as one command.
    static func command(of items: some Collection<BatchItem>) -> EncodedRedisCommand {
        let head = items.first!.head
        var count = head.argumentCount
        var size = head.arguments.bytes.count + 16
        for item in items {
            precondition(item.head === head, "a batch's items share one head")
            count += item.argumentCount
            size += item.arguments.bytes.count
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        bytes.append(UInt8(ascii: "*"))
        RESPEncoder.appendDecimal(count, to: &bytes)
        bytes.append(contentsOf: withoutArrayHeader(head.arguments.bytes))
        for item in items { bytes.append(contentsOf: withoutArrayHeader(item.arguments.bytes)) }
        return EncodedRedisCommand(resp: bytes, script: head.arguments.script)
    }

    /// An encoded command's arguments: what follows its `*<count>\r\n`.
    private static func withoutArrayHeader(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
        var index = 1
        while bytes[index] != 0x0a { index += 1 }
        return bytes[(index + 1)...]
    }

    /// `items` as one request whose reply is shared out: element `i` answers item `i`
    /// (an error element fails that item only); a failure of the whole command, or a
    /// reply of the wrong shape, fails every item.
    static func request(
        batching items: [BatchItem], completions: [@Sendable (Result<RedisReply, RedisError>) -> Void],
        onAnswered: (@Sendable () -> Void)? = nil
    ) -> Request {
        Request(command: command(of: items)) { result in
            defer { onAnswered?() }
            let replies: [RedisReply]
            switch result {
            case .failure(let error):
                for completion in completions { completion(.failure(error)) }
                return
            case .success(let reply):
                guard let elements = reply.array, elements.count == completions.count else {
                    let error = RedisError(
                        code: .unexpectedReply, message: "a batched command answered \(completions.count) items wrongly"
                    )
                    for completion in completions { completion(.failure(error)) }
                    return
                }
                replies = elements
            }
            for (completion, reply) in zip(completions, replies) {
                if case .error(let error) = reply {
                    completion(.failure(error))
                } else {
                    completion(.success(reply))
                }
            }
        }
    }
}

extension EncodedRedisCommand {
    /// A command already written in RESP, as a whole (`*<count>` included).
    init(resp bytes: [UInt8], script: RedisScript?) {
        self.bytes = bytes
        self.script = script
    }
}
