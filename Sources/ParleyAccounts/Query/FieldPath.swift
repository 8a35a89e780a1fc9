/// Syntax of Parse field names as the query compiler accepts them.
enum FieldPath {
    /// Longest field name accepted.
    static let maxNameBytes = 128
    /// Most segments in a dotted path (`address.city`).
    static let maxSegments = 8

    /// `^[A-Za-z][A-Za-z0-9_]*$`, at most `maxNameBytes` bytes.
    static func isValidName<S: StringProtocol>(_ name: S) -> Bool {
        let bytes = name.utf8
        guard let first = bytes.first, bytes.count <= maxNameBytes, isLetter(first) else { return false }
        return bytes.allSatisfy { isLetter($0) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }
    }

    /// One or more valid names joined by dots.
    static func isValidPath(_ path: String) -> Bool {
        let segments = path.split(separator: ".", omittingEmptySubsequences: false)
        return segments.count <= maxSegments && segments.allSatisfy { isValidName($0) }
    }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }
}
