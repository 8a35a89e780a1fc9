import ParleyHTTP

/// A whole body sent a slice at a time, so that the connection's output queue holds at most
/// its stream bound (a `.bytes` body is queued at once, and one over `--max-outbound-bytes`
/// closes the connection).
enum ResponseSlices {
    /// Bytes per slice after the first.
    static let sliceBytes = 128 << 10

    /// `bytes` as a stream with its length announced: a first slice of `first` bytes (the
    /// connection's queue is empty then, and the kernel takes most of it), then `sliceBytes` ones.
    static func body(_ bytes: [UInt8], first: Int) -> HTTPResponseBody {
        let cursor = SliceCursor(bytes, first: first)
        return .stream(length: bytes.count) { cursor.next() }
    }

    /// What is left to send; one `next()` at a time (the server's rule for a stream).
    private final class SliceCursor: @unchecked Sendable {
        private var rest: [UInt8]
        private var offset = 0
        /// The size of the first slice; 0 once it is sent.
        private var first: Int

        init(_ bytes: [UInt8], first: Int) {
            rest = bytes
            self.first = first
        }

        func next() -> [UInt8]? {
            if first > 0 && rest.count > first {
                // The first slice, and the rest in an array of its own: the whole body is freed now.
                let head = Array(rest[..<first])
                rest = Array(rest[first...])
                first = 0
                return head
            }
            first = 0
            guard offset < rest.count else { return nil }
            let end = min(rest.count, offset + ResponseSlices.sliceBytes)
            defer { offset = end }
            return Array(rest[offset..<end])
        }
    }
}
