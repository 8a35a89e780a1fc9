/// A streaming UTF-8 validator: fed bytes in any split, it rejects at the first byte that cannot
/// start or continue a well-formed sequence (overlongs, surrogates and code points past U+10FFFF
/// included), so an invalid text message fails before the rest of it arrives.
public struct UTF8StreamValidator: Sendable {
    /// What the next byte must be.
    private enum Expectation: UInt8, Sendable {
        case start          // any lead byte
        case tail1          // one 80...BF byte to go
        case tail2          // two 80...BF bytes to go
        case tail3          // three 80...BF bytes to go
        case afterE0        // A0...BF, then one more
        case afterED        // 80...9F (no surrogates), then one more
        case afterF0        // 90...BF (no overlongs), then two more
        case afterF4        // 80...8F (≤ U+10FFFF), then two more
    }

    private var expectation = Expectation.start

    public init() {}

    /// True when no sequence is left open (a message may end here).
    public var isAtCharacterBoundary: Bool { expectation == .start }

    /// Validates more bytes; returns false at the first invalid byte (then the validator is spent).
    public mutating func validate(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        var index = 0
        var state = expectation
        while index < count {
            if state == .start {
                // ASCII fast path, eight bytes at a time.
                while index + 8 <= count, base.loadUnaligned(fromByteOffset: index, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                    index += 8
                }
                guard index < count else { break }
            }
            let byte = base.load(fromByteOffset: index, as: UInt8.self)
            index += 1
            switch state {
            case .start:
                switch byte {
                case 0x00...0x7F: continue
                case 0xC2...0xDF: state = .tail1
                case 0xE0: state = .afterE0
                case 0xE1...0xEC, 0xEE...0xEF: state = .tail2
                case 0xED: state = .afterED
                case 0xF0: state = .afterF0
                case 0xF1...0xF3: state = .tail3
                case 0xF4: state = .afterF4
                default:
                    expectation = state
                    return false
                }
            case .tail1, .tail2, .tail3:
                guard byte & 0xC0 == 0x80 else { return false }
                state = state == .tail1 ? .start : (state == .tail2 ? .tail1 : .tail2)
            case .afterE0:
                guard (0xA0...0xBF).contains(byte) else { return false }
                state = .tail1
            case .afterED:
                guard (0x80...0x9F).contains(byte) else { return false }
                state = .tail1
            case .afterF0:
                guard (0x90...0xBF).contains(byte) else { return false }
                state = .tail2
            case .afterF4:
                guard (0x80...0x8F).contains(byte) else { return false }
                state = .tail2
            }
        }
        expectation = state
        return true
    }

    /// Validates a whole byte sequence.
    public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var validator = UTF8StreamValidator()
        return validator.validate(bytes) && validator.isAtCharacterBoundary
    }
}
