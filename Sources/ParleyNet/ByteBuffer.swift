/// A growable byte buffer with a reader index, for incremental parsing and output assembly.
public struct ByteBuffer: Sendable {
    @usableFromInline var storage: [UInt8]
    @usableFromInline var readerIndex: Int

    public init(capacity: Int = 256) {
        storage = []
        storage.reserveCapacity(capacity)
        readerIndex = 0
    }

    public init(bytes: [UInt8]) {
        storage = bytes
        readerIndex = 0
    }

    public init(string: String) {
        self.init(bytes: Array(string.utf8))
    }

    /// Bytes written but not yet read.
    @inlinable public var readableBytes: Int { storage.count - readerIndex }

    @inlinable public var isEmpty: Bool { readableBytes == 0 }

    @inlinable public mutating func writeBytes<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        storage.append(contentsOf: bytes)
    }

    @inlinable public mutating func writeBytes(_ bytes: UnsafeRawBufferPointer) {
        storage.append(contentsOf: bytes)
    }

    @inlinable public mutating func writeByte(_ byte: UInt8) {
        storage.append(byte)
    }

    @inlinable public mutating func writeString(_ string: String) {
        storage.append(contentsOf: string.utf8)
    }

    /// Writes an integer in decimal ASCII.
    public mutating func writeDecimal(_ value: Int) {
        if value < 0 {
            storage.append(UInt8(ascii: "-"))
            writeDecimal(-value)
            return
        }
        if value < 10 {
            storage.append(UInt8(truncatingIfNeeded: value) + 48)
            return
        }
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                      UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { raw in
            while rest > 0 {
                raw[count] = UInt8(truncatingIfNeeded: rest % 10) + 48
                rest /= 10
                count += 1
            }
            for i in stride(from: count - 1, through: 0, by: -1) { storage.append(raw[i]) }
        }
    }

    /// Marks `count` readable bytes as consumed.
    @inlinable public mutating func moveReaderIndex(forwardBy count: Int) {
        precondition(count >= 0 && count <= readableBytes, "reader index out of range")
        readerIndex += count
        if readerIndex == storage.count {
            storage.removeAll(keepingCapacity: true)
            readerIndex = 0
        }
    }

    /// Reads and consumes `count` bytes.
    public mutating func readBytes(_ count: Int) -> [UInt8]? {
        guard count <= readableBytes else { return nil }
        let bytes = Array(storage[readerIndex..<(readerIndex + count)])
        moveReaderIndex(forwardBy: count)
        return bytes
    }

    /// The readable bytes as a slice (no copy).
    @inlinable public var readableBytesView: ArraySlice<UInt8> { storage[readerIndex...] }

    @inlinable public func withUnsafeReadableBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try storage.withUnsafeBytes { raw in
            try body(UnsafeRawBufferPointer(rebasing: raw[readerIndex...]))
        }
    }

    /// Drops consumed bytes so the storage does not grow without bound.
    public mutating func discardReadBytes() {
        guard readerIndex > 0 else { return }
        storage.removeFirst(readerIndex)
        readerIndex = 0
    }

    /// Empties the buffer, keeping its capacity.
    public mutating func clear() {
        storage.removeAll(keepingCapacity: true)
        readerIndex = 0
    }

    /// The readable bytes as an array (a copy unless nothing was read yet).
    public var readableArray: [UInt8] { readerIndex == 0 ? storage : Array(storage[readerIndex...]) }
}
