import ParleyHTTP

/// A whole body sent a slice at a time, so that the connection's output queue holds at most
/// its stream bound (a `.bytes` body is queued at once, and one over `--max-outbound-bytes`
/// closes the connection).
enum ResponseSlices {
    /// Bodies longer than this are sliced.
    static let threshold = 256 << 10
    /// Bytes per slice.
    static let sliceBytes = 128 << 10

    /// `bytes` as a stream of slices with its length announced.
    static func body(_ bytes: [UInt8]) -> HTTPResponseBody {
        let cursor = SliceCursor(bytes)
        return .stream(length: bytes.count) { cursor.next() }
    }

    /// The position in the body; one `next()` at a time (the server's rule for a stream).
    private final class SliceCursor: @unchecked Sendable {
        private let bytes: [UInt8]
        private var offset = 0

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
        }

        func next() -> [UInt8]? {
            guard offset < bytes.count else { return nil }
            let end = min(bytes.count, offset + ResponseSlices.sliceBytes)
            defer { offset = end }
            return Array(bytes[offset..<end])
        }
    }
}
