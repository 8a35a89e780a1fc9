/// XOR masking of payload bytes (RFC 6455 section 5.3), eight bytes at a time.
enum WebSocketMask {
    /// XORs `bytes` with `key` (wire-order bytes packed big-endian), starting `phase` bytes
    /// into the key; returns the phase for the byte after the last one.
    static func apply(key: UInt32, phase: Int, to bytes: UnsafeMutableRawBufferPointer) -> Int {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return phase }
        let count = bytes.count
        // The key rotated so that its first byte lines up with bytes[0], in memory order.
        let rotated = phase == 0 ? key : (key << UInt32(8 * phase)) | (key >> UInt32(32 - 8 * phase))
        let keyBytes = (UInt8(truncatingIfNeeded: rotated >> 24), UInt8(truncatingIfNeeded: rotated >> 16),
                        UInt8(truncatingIfNeeded: rotated >> 8), UInt8(truncatingIfNeeded: rotated))
        var word: UInt64 = 0
        withUnsafeMutableBytes(of: &word) { raw in
            for i in 0..<2 {
                raw[4 * i] = keyBytes.0
                raw[4 * i + 1] = keyBytes.1
                raw[4 * i + 2] = keyBytes.2
                raw[4 * i + 3] = keyBytes.3
            }
        }
        var index = 0
        while index + 8 <= count {
            let value = base.loadUnaligned(fromByteOffset: index, as: UInt64.self)
            base.storeBytes(of: value ^ word, toByteOffset: index, as: UInt64.self)
            index += 8
        }
        var shift: UInt32 = 24
        while index < count {
            let keyByte = UInt8(truncatingIfNeeded: rotated >> shift)
            base.storeBytes(of: base.load(fromByteOffset: index, as: UInt8.self) ^ keyByte, toByteOffset: index, as: UInt8.self)
            index += 1
            shift = shift == 0 ? 24 : shift - 8
        }
        return (phase + count) & 3
    }
}
