/// Eight-bytes-at-a-time checks for the string fast paths of the reader and the serializer.
enum JSONWordScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// Whether any of the eight bytes is a quote, a backslash or a control character (exact:
    /// the usual "has byte less than / equal to" bit tricks, which never miss one).
    @inline(__always)
    static func needsEscape(_ word: UInt64) -> Bool {
        let quotes = word ^ (ones &* 0x22)
        let backslashes = word ^ (ones &* 0x5C)
        let hasQuote = (quotes &- ones) & ~quotes
        let hasBackslash = (backslashes &- ones) & ~backslashes
        let hasControl = (word &- ones &* 0x20) & ~word
        return (hasQuote | hasBackslash | hasControl) & highBits != 0
    }

    /// `needsEscape`, or any byte is non-ASCII (which the reader validates as UTF-8).
    @inline(__always)
    static func needsAttention(_ word: UInt64) -> Bool {
        word & highBits != 0 || needsEscape(word)
    }
}
