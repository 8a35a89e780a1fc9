/// Byte classes of RFC 9110/9112 used by the parser and the header store.
///
/// Bitmaps instead of tables so that a check is two shifts and no memory load.
enum HTTPCharacterClass {
    /// `tchar`: `!#$%&'*+-.^_\`|~`, digits and letters.
    @inline(__always)
    static func isToken(_ byte: UInt8) -> Bool {
        let low: UInt64 = 0x03ff_6cfa_0000_0000
        let high: UInt64 = 0x57ff_ffff_c7ff_fffe
        if byte < 64 { return (low >> UInt64(byte)) & 1 == 1 }
        if byte < 128 { return (high >> UInt64(byte - 64)) & 1 == 1 }
        return false
    }

    /// A byte allowed inside a field value: VCHAR, obs-text, SP or HTAB (not CR, LF, NUL, other controls, DEL).
    @inline(__always)
    static func isFieldValue(_ byte: UInt8) -> Bool {
        byte >= 0x20 ? byte != 0x7F : byte == 0x09
    }

    /// A byte allowed in a request-target: visible ASCII (`%x21-7E`).
    @inline(__always)
    static func isTarget(_ byte: UInt8) -> Bool {
        byte >= 0x21 && byte <= 0x7E
    }

    /// A request-target byte that needs no further parsing in an origin-form path: visible ASCII
    /// except `#`, `%` and `?`.
    @inline(__always)
    static func isPlainPathByte(_ byte: UInt8) -> Bool {
        let low: UInt64 = 0x7fff_ffd6_0000_0000
        let high: UInt64 = 0x7fff_ffff_ffff_ffff
        if byte < 64 { return (low >> UInt64(byte)) & 1 == 1 }
        if byte < 128 { return (high >> UInt64(byte - 64)) & 1 == 1 }
        return false
    }

    /// A request-target byte that can be in a query: visible ASCII except `#` (which starts the fragment).
    @inline(__always)
    static func isQueryByte(_ byte: UInt8) -> Bool {
        isTarget(byte) && byte != .hash
    }

    /// SP or HTAB.
    @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09
    }

    /// The value of a hexadecimal digit, or nil.
    @inline(__always)
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    /// ASCII lower case of a byte; other bytes unchanged.
    @inline(__always)
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte &- 0x41 < 26 ? byte | 0x20 : byte
    }

    /// Whether `bytes` equal `lowercaseLiteral` ignoring ASCII case (the literal must be lower case).
    static func equalsCaseInsensitive(_ bytes: UnsafeBufferPointer<UInt8>, _ lowercaseLiteral: StaticString) -> Bool {
        guard bytes.count == lowercaseLiteral.utf8CodeUnitCount else { return false }
        let literal = lowercaseLiteral.utf8Start
        for index in 0..<bytes.count where lowercased(bytes[index]) != literal[index] {
            return false
        }
        return true
    }
}

extension UInt8 {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let comma: UInt8 = 0x2C
    static let slash: UInt8 = 0x2F
    static let questionMark: UInt8 = 0x3F
    static let hash: UInt8 = 0x23
    static let percent: UInt8 = 0x25
    static let equals: UInt8 = 0x3D
    static let quote: UInt8 = 0x22
    static let backslash: UInt8 = 0x5C
    static let asterisk: UInt8 = 0x2A
    static let plus: UInt8 = 0x2B
}
