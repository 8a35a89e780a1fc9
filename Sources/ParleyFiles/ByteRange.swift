/// One `Range: bytes=…` request (RFC 9110 §14.1.2); several ranges are answered whole.
public enum ByteRange: Equatable, Sendable {
    case whole
    case part(Range<Int>)
    case unsatisfiable

    /// The range `header` asks of a body of `size` bytes.
    public static func parse(_ header: String, size: Int) -> ByteRange {
        let text = header.trimmingSpaces()
        guard text.hasPrefix("bytes=") else { return .whole }
        let spec = text.dropFirst(6)
        guard !spec.contains(",") else { return .whole }
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return .whole }
        let first = parts[0].trimmingSpaces(), last = parts[1].trimmingSpaces()
        if first.isEmpty {
            guard let suffix = Int(last), suffix > 0 else { return last.isEmpty ? .whole : .unsatisfiable }
            guard size > 0 else { return .unsatisfiable }
            return .part(max(0, size - suffix)..<size)
        }
        guard let start = Int(first), start >= 0, first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return .whole }
        guard start < size else { return .unsatisfiable }
        if last.isEmpty { return .part(start..<size) }
        guard let end = Int(last), end >= start, last.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return .whole }
        return .part(start..<min(end + 1, size))
    }
}

extension String {
    func trimmingSpaces() -> String { self[...].trimmingSpaces() }
}
