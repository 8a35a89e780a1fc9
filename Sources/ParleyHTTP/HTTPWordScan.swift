/// Eight-bytes-at-a-time checks for the parser's pass over a whole head: each says whether all
/// eight bytes belong to a class, exactly (the usual "has a byte less than / equal to" bit tricks,
/// which never miss a byte and never flag a word without one). A word that fails is read byte by
/// byte, so the checks may cover only the common part of a class.
enum HTTPWordScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080
    private static let lowBits: UInt64 = 0x7F7F_7F7F_7F7F_7F7F

    /// The eight bytes of `bytes` from `index`, first byte lowest (the caller checked that there are eight).
    @inline(__always)
    static func load(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(bytes.baseAddress.unsafelyUnwrapped + index).loadUnaligned(as: UInt64.self))
    }

    /// Field-value bytes other than HTAB: SP, VCHAR and obs-text (no control byte, no DEL).
    @inline(__always)
    static func isFieldValue(_ word: UInt64) -> Bool {
        !hasByte(below: 0x20, in: word) && !hasByte(0x7F, in: word)
    }

    /// Request-target bytes: visible ASCII (`%x21-7E`).
    @inline(__always)
    static func isTarget(_ word: UInt64) -> Bool {
        word & highBits == 0 && !hasByte(below: 0x21, in: word) && !hasByte(0x7F, in: word)
    }

    /// `HTTPCharacterClass.isPlainPathByte`: target bytes other than `#`, `%` and `?`.
    @inline(__always)
    static func isPlainPath(_ word: UInt64) -> Bool {
        isTarget(word) && !hasByte(.hash, in: word) && !hasByte(.percent, in: word) && !hasByte(.questionMark, in: word)
    }

    /// `HTTPCharacterClass.isQueryByte`: target bytes other than `#`.
    @inline(__always)
    static func isQuery(_ word: UInt64) -> Bool {
        isTarget(word) && !hasByte(.hash, in: word)
    }

    /// ASCII letters, digits and `-`: the token bytes of nearly every field name.
    @inline(__always)
    static func isNameCommon(_ word: UInt64) -> Bool {
        guard word & highBits == 0 else { return false }
        // Per byte, with no carry between bytes (every byte is below 0x80): a byte's high bit says
        // whether it is at least the bound.
        let folded = word | (ones &* 0x20)
        let letters = atLeast(0x61, folded) & ~atLeast(0x7B, folded)
        let digits = atLeast(0x30, word) & ~atLeast(0x3A, word)
        let dashes = ~(((word ^ (ones &* 0x2D)) &+ lowBits) | (word ^ (ones &* 0x2D))) & highBits
        return letters | digits | dashes == highBits
    }

    /// Each byte's high bit set when the byte (below 0x80) is at least `bound` (at most 0x80).
    @inline(__always)
    private static func atLeast(_ bound: UInt8, _ word: UInt64) -> UInt64 {
        (word &+ ones &* UInt64(0x80 - bound)) & highBits
    }

    /// Whether some byte is below `bound` (at most 0x80).
    @inline(__always)
    private static func hasByte(below bound: UInt8, in word: UInt64) -> Bool {
        (word &- ones &* UInt64(bound)) & ~word & highBits != 0
    }

    /// Whether some byte is `byte`.
    @inline(__always)
    private static func hasByte(_ byte: UInt8, in word: UInt64) -> Bool {
        let difference = word ^ (ones &* UInt64(byte))
        return (difference &- ones) & ~difference & highBits != 0
    }
}
