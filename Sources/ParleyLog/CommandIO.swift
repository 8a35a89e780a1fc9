#if canImport(Glibc)
import Glibc
#endif

/// Where a command-line tool reads and writes; `standard` is the process's stdin/stdout/stderr.
public struct CommandIO: Sendable {
    public var output: @Sendable (String) -> Void
    public var error: @Sendable (String) -> Void
    public var readLine: @Sendable () -> String?

    public init(output: @escaping @Sendable (String) -> Void, error: @escaping @Sendable (String) -> Void,
                readLine: @escaping @Sendable () -> String? = { Swift.readLine(strippingNewline: true) }) {
        self.output = output
        self.error = error
        self.readLine = readLine
    }

    /// Lines to standard output and standard error.
    public static let standard = CommandIO(
        output: { text in writeAll(1, text + "\n") },
        error: { text in writeAll(2, text + "\n") })

    /// Writes all of `text` to `fd`, retrying short writes and EINTR.
    public static func writeAll(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }
}
