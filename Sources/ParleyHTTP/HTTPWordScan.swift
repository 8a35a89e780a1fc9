/// Eight-bytes-at-a-time scans for the parser's pass over a whole head.
///
/// Each class check returns a word's stops: the high bit of each byte outside the class is set,
/// exactly for the first such byte (the usual "has a byte less than / equal to" bit tricks, whose
/// borrows and carries only ever run towards later bytes). So a word is all in the class when it
/// has no stops, and `run` says how many of its bytes, from the first, are. A scan then goes on
/// byte by byte from the stop, so a check may cover only the common part of a class.
enum HTTPWordScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080
    private static let lowBits: UInt64 = 0x7F7F_7F7F_7F7F_7F7F

    /// The eight bytes of `bytes` from `index`, first byte lowest (the caller checked that there are eight).
    @inline(__always)
    static func load(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(bytes.baseAddress.unsafelyUnwrapped + index).loadUnaligned(as: UInt64.self))
    }

    /// How many bytes of a word, from the first, come before its first stop (8 without stops).
    @inline(__always)
    static func run(_ stops: UInt64) -> Int {
        stops.trailingZeroBitCount &>> 3
    }

    /// Field-value bytes other than HTAB: SP, VCHAR and obs-text (no control byte, no DEL).
    @inline(__always)
    static func fieldValueStops(_ word: UInt64) -> UInt64 {
        bytes(below: 0x20, in: word) | bytes(0x7F, in: word)
    }

    /// Request-target bytes: visible ASCII (`%x21-7E`).
    @inline(__always)
    static func targetStops(_ word: UInt64) -> UInt64 {
        word & highBits | bytes(below: 0x21, in: word) | bytes(0x7F, in: word)
    }

    /// `HTTPCharacterClass.isPlainPathByte`: target bytes other than `#`, `%` and `?`.
    @inline(__always)
    static func plainPathStops(_ word: UInt64) -> UInt64 {
        targetStops(word) | bytes(.hash, in: word) | bytes(.percent, in: word) | bytes(.questionMark, in: word)
    }

    /// `HTTPCharacterClass.isQueryByte`: target bytes other than `#`.
    @inline(__always)
    static func queryStops(_ word: UInt64) -> UInt64 {
        targetStops(word) | bytes(.hash, in: word)
    }

    /// ASCII letters, digits and `-`: the token bytes of nearly every field name.
    @inline(__always)
    static func nameCommonStops(_ word: UInt64) -> UInt64 {
        // Per byte, with no carry between bytes below 0x80 (a byte from 0x80 is a stop itself and
        // carries only into later bytes): a byte's high bit says whether it is at least the bound.
        let folded = word | (ones &* 0x20)
        let letters = atLeast(0x61, folded) & ~atLeast(0x7B, folded)
        let digits = atLeast(0x30, word) & ~atLeast(0x3A, word)
        let dashes = ~(((word ^ (ones &* 0x2D)) &+ lowBits) | (word ^ (ones &* 0x2D))) & highBits
        return word & highBits | ~(letters | digits | dashes) & highBits
    }

    /// Each byte's high bit set when the byte (below 0x80) is at least `bound` (at most 0x80).
    @inline(__always)
    private static func atLeast(_ bound: UInt8, _ word: UInt64) -> UInt64 {
        (word &+ ones &* UInt64(0x80 - bound)) & highBits
    }

    /// The high bit of bytes below `bound` (at most 0x80): exact up to the first such byte.
    @inline(__always)
    private static func bytes(below bound: UInt8, in word: UInt64) -> UInt64 {
        (word &- ones &* UInt64(bound)) & ~word & highBits
    }

    /// The high bit of bytes equal to `byte`: exact up to the first such byte.
    @inline(__always)
    private static func bytes(_ byte: UInt8, in word: UInt64) -> UInt64 {
        let difference = word ^ (ones &* UInt64(byte))
        return (difference &- ones) & ~difference & highBits
    }
}
